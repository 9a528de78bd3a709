package akf.jobs;

import org.apache.spark.sql.api.java.UDF2;

/**
 * The record id of the streaming job: the text of a top-level string field of a JSON object.
 *
 * <p>Registered by the job as {@code akf_json_string_field(value, field)} and used as
 * {@code coalesce(akf_json_string_field(v, f), get_json_object(v, '$.' || f))}. It answers only where the
 * answer is certain: the whole value is one strict RFC 8259 JSON object (surrounding whitespace allowed),
 * and the first member named {@code field} holds a string. Then {@code get_json_object} gives the same
 * text (it takes the first member of that name too, and accepts every strict document), only at several
 * times the cost: it builds a Jackson parser per record. In every other case (no such member, a
 * non-string value, anything that is not strict JSON, nesting deeper than {@link #MAX_DEPTH}) it answers
 * null and {@code get_json_object} decides, so the pair never disagrees with Spark's own function.
 */
public final class JsonStringField implements UDF2<String, String, String> {
    private static final long serialVersionUID = 1L;

    /** Deeper nesting is left to get_json_object (Jackson refuses more than 1000 levels by default). */
    static final int MAX_DEPTH = 500;

    @Override
    public String call(String json, String field) {
        if (json == null || field == null) {
            return null;
        }
        try {
            return new Reader(json).stringMember(field);
        } catch (NotStrict e) {
            return null;
        }
    }

    /** The value is not what this reader answers for; get_json_object decides. */
    static final class NotStrict extends Exception {
        private static final long serialVersionUID = 1L;
        static final NotStrict INSTANCE = new NotStrict();

        private NotStrict() {
            super(null, null, false, false);
        }
    }

    /** A strict, single-pass JSON reader over one document. */
    static final class Reader {
        private final String text;
        private int pos;

        Reader(String text) {
            this.text = text;
        }

        /** The first top-level member named {@code field} when it is a string; NotStrict otherwise. */
        String stringMember(String field) throws NotStrict {
            skipSpace();
            expect('{');
            String found = null;
            boolean seen = false;
            skipSpace();
            if (peek() == '}') {
                pos++;
            } else {
                while (true) {
                    skipSpace();
                    String name = string();
                    skipSpace();
                    expect(':');
                    skipSpace();
                    if (!seen && name.equals(field)) {
                        seen = true;
                        if (peek() != '"') {
                            throw NotStrict.INSTANCE;
                        }
                        found = string();
                    } else {
                        value(1);
                    }
                    skipSpace();
                    char separator = next();
                    if (separator == '}') {
                        break;
                    }
                    if (separator != ',') {
                        throw NotStrict.INSTANCE;
                    }
                }
            }
            skipSpace();
            if (pos != text.length() || found == null) {
                throw NotStrict.INSTANCE;
            }
            return found;
        }

        private void value(int depth) throws NotStrict {
            if (depth > MAX_DEPTH) {
                throw NotStrict.INSTANCE;
            }
            char c = peek();
            if (c == '"') {
                string();
            } else if (c == '{') {
                pos++;
                container('}', depth, true);
            } else if (c == '[') {
                pos++;
                container(']', depth, false);
            } else if (c == 't') {
                literal("true");
            } else if (c == 'f') {
                literal("false");
            } else if (c == 'n') {
                literal("null");
            } else {
                number();
            }
        }

        private void container(char close, int depth, boolean members) throws NotStrict {
            skipSpace();
            if (peek() == close) {
                pos++;
                return;
            }
            while (true) {
                skipSpace();
                if (members) {
                    string();
                    skipSpace();
                    expect(':');
                    skipSpace();
                }
                value(depth + 1);
                skipSpace();
                char separator = next();
                if (separator == close) {
                    return;
                }
                if (separator != ',') {
                    throw NotStrict.INSTANCE;
                }
            }
        }

        private void literal(String word) throws NotStrict {
            if (!text.startsWith(word, pos)) {
                throw NotStrict.INSTANCE;
            }
            pos += word.length();
        }

        /** {@code -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?} */
        private void number() throws NotStrict {
            if (peek() == '-') {
                pos++;
            }
            if (peek() == '0') {
                pos++;
            } else {
                digits();
            }
            if (pos < text.length() && text.charAt(pos) == '.') {
                pos++;
                digits();
            }
            if (pos < text.length() && (text.charAt(pos) == 'e' || text.charAt(pos) == 'E')) {
                pos++;
                if (peek() == '+' || peek() == '-') {
                    pos++;
                }
                digits();
            }
        }

        private void digits() throws NotStrict {
            int start = pos;
            while (pos < text.length() && text.charAt(pos) >= '0' && text.charAt(pos) <= '9') {
                pos++;
            }
            if (pos == start) {
                throw NotStrict.INSTANCE;
            }
        }

        private String string() throws NotStrict {
            expect('"');
            int start = pos;
            while (true) {
                char c = next();
                if (c == '"') {
                    return text.substring(start, pos - 1);
                }
                if (c == '\\') {
                    pos = start;
                    return escapedString();
                }
                if (c < 0x20) {
                    throw NotStrict.INSTANCE;
                }
            }
        }

        private String escapedString() throws NotStrict {
            StringBuilder out = new StringBuilder();
            while (true) {
                char c = next();
                if (c == '"') {
                    return out.toString();
                }
                if (c < 0x20) {
                    throw NotStrict.INSTANCE;
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                char escape = next();
                switch (escape) {
                    case '"', '\\', '/' -> out.append(escape);
                    case 'b' -> out.append('\b');
                    case 'f' -> out.append('\f');
                    case 'n' -> out.append('\n');
                    case 'r' -> out.append('\r');
                    case 't' -> out.append('\t');
                    case 'u' -> unicodeEscape(out);
                    default -> throw NotStrict.INSTANCE;
                }
            }
        }

        /** A {@code \\uXXXX} escape; surrogates only as a high-low pair (a lone one is left to get_json_object). */
        private void unicodeEscape(StringBuilder out) throws NotStrict {
            char c = hexChar();
            if (Character.isLowSurrogate(c)) {
                throw NotStrict.INSTANCE;
            }
            out.append(c);
            if (Character.isHighSurrogate(c)) {
                if (!text.startsWith("\\u", pos)) {
                    throw NotStrict.INSTANCE;
                }
                pos += 2;
                char low = hexChar();
                if (!Character.isLowSurrogate(low)) {
                    throw NotStrict.INSTANCE;
                }
                out.append(low);
            }
        }

        private char hexChar() throws NotStrict {
            int code = 0;
            for (int i = 0; i < 4; i++) {
                int digit = Character.digit(next(), 16);
                if (digit < 0) {
                    throw NotStrict.INSTANCE;
                }
                code = code * 16 + digit;
            }
            return (char) code;
        }

        private void skipSpace() {
            while (pos < text.length()) {
                char c = text.charAt(pos);
                if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                    return;
                }
                pos++;
            }
        }

        private char peek() throws NotStrict {
            if (pos >= text.length()) {
                throw NotStrict.INSTANCE;
            }
            return text.charAt(pos);
        }

        private char next() throws NotStrict {
            char c = peek();
            pos++;
            return c;
        }

        private void expect(char wanted) throws NotStrict {
            if (next() != wanted) {
                throw NotStrict.INSTANCE;
            }
        }
    }
}
