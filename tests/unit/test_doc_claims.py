"""Claims the docs make about the code, held against the code: where ``AKF_PAIRS_CONFIG`` must be set (said
in several docs and in the DAG file's own error), the supported version ranges (stated in the getting-started
page and in limits.md, defined by pyproject.toml and the job side), the module paths the docs and
pyproject.toml name, and the defaults, bases, constructors and modules docs/reference.md quotes in prose.

Each test names the doc, the claim and what the code says, so a claim that went stale says which."""

from __future__ import annotations

import re
from pathlib import Path

from airflow_kafka_failover.run_format.options import JobOptions
from airflow_kafka_failover.workflows.factory import CONFIG_ENV, CONFIG_ENV_READERS

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _flat(path: Path) -> str:
    return " ".join(path.read_text().split())


def sentences_naming(name: str) -> list[tuple[str, str]]:
    """``(doc, sentence)`` for every sentence of README and docs/ that names ``name``."""
    found = []
    for path in DOCS:
        for sentence in re.split(r"(?<=[.:;])\s+(?=[-A-Z`(])", _flat(path)):
            if name in sentence:
                found.append((str(path.relative_to(REPO)), sentence))
    return found


def test_every_doc_that_says_where_akf_pairs_config_is_set_names_the_dag_files_own_list():
    """The DAG file's error (``CONFIG_ENV_READERS``) is the one list; a doc that says where to set the
    variable names exactly those components."""
    where = [(doc, s) for doc, s in sentences_naming(CONFIG_ENV) if "environment" in s]
    assert {"docs/getting-started.md", "docs/runbook.md", "docs/reference.md"} <= {doc for doc, _ in where}
    wrong = [
        f"{doc}: {sentence}"
        for doc, sentence in where
        if CONFIG_ENV_READERS not in sentence or "triggerer" in sentence
    ]
    assert not wrong, f"name {CONFIG_ENV_READERS!r} where {CONFIG_ENV} must be set: {wrong}"


REFERENCE = REPO / "docs" / "reference.md"
ROW = re.compile(r"^\| `([\w`, ]+)` \| ([^|]+?) \|")


def reference_sections() -> list[tuple[str, str]]:
    """``(heading, text)`` of every section of docs/reference.md, at every heading level."""
    return [(s.splitlines()[0], s) for s in re.split(r"\n(?=#{2,4} )", REFERENCE.read_text())]


def provider_modules() -> list[str]:
    from airflow_kafka_failover.get_provider_info import get_provider_info

    info = get_provider_info()
    return [
        module
        for kind in ("hooks", "sensors", "operators")
        for e in info[kind]
        for module in e["python-modules"]
    ]


def provider_class(name: str) -> type:
    """The hook, operator or sensor ``name`` of the provider's metadata, or of the cluster managers."""
    import importlib

    for module in [*provider_modules(), "airflow_kafka_failover.cluster_managers.kubernetes"]:
        found = getattr(importlib.import_module(module), name, None)
        if isinstance(found, type):
            return found
    raise AssertionError(
        f"docs/reference.md names {name}, which no module of the provider's metadata defines"
    )


def table_rows(section: str, header: str) -> list[tuple[str, str]]:
    """The first two cells of each row of every table under ``header`` (its first line) in ``section``."""
    tables = [part.split("\n\n")[0] for part in section.split(header)[1:]]
    return [m.groups() for table in tables for line in table.splitlines()[1:] if (m := ROW.match(line))]


def own_parameters(cls: type) -> dict:
    """The constructor parameters of ``cls`` and of its bases in the provider (a sensor's common arguments
    are its base's), the class's own last."""
    import inspect

    found: dict = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("airflow_kafka_failover") and "__init__" in vars(klass):
            found.update(inspect.signature(klass.__init__).parameters)
    return found


def takes_job_options(cls: type) -> bool:
    """Whether ``cls`` takes the job's options by keyword (``**kwargs`` made into ``JobOptions``)."""
    import inspect

    kinds = [param.kind for param in inspect.signature(cls.__init__).parameters.values()]
    return inspect.Parameter.VAR_KEYWORD in kinds and "job_options" in inspect.getsource(cls.__init__)


def _quoted_default(cell: str):
    """What a default cell says: ``required``, a Python literal in backticks, a bare word in backticks, or
    None for prose the test cannot hold to a value."""
    import ast

    if cell.strip() == "required":
        return "required"
    quoted = re.match(r"`([^`]+)`", cell.strip())
    if not quoted or re.search(r"[<\[]", quoted.group(1)):
        return None
    try:
        return ast.literal_eval(quoted.group(1))
    except (ValueError, SyntaxError):
        return quoted.group(1)


def _default_differs(quoted, default) -> bool:
    import inspect

    if quoted == "required":
        return default is not inspect.Parameter.empty
    if default is None and quoted in ({}, ()):
        return False  # the code's None stands for an empty mapping or sequence
    return quoted != getattr(default, "value", default)


def test_the_argument_defaults_the_reference_quotes_are_the_constructors():
    """Every ``| argument | default | meaning |`` table under a ``### `Class` `` heading: the arguments
    exist on the class (on one of the two, for a section of two) with the quoted default."""
    wrong, checked = [], 0
    for heading, section in reference_sections():
        named = re.findall(r"`([A-Z]\w+)`", heading) if heading.startswith("### `") else []
        classes = [provider_class(name) for name in named]
        for names, cell in table_rows(section, "| argument | default | meaning |"):
            quoted = _quoted_default(cell)
            for name in names.split("`, `"):
                params = [own_parameters(c).get(name) for c in classes]
                if (
                    not any(params)
                    and all(takes_job_options(c) for c in classes)
                    and name in JobOptions.model_fields
                ):
                    checked += 1  # a job option the operator takes by keyword (required when it submits)
                    continue
                if not any(params):
                    wrong.append(f"{heading}: no argument {name}")
                    continue
                checked += 1
                for cls, param in zip(classes, params, strict=True):
                    if param is not None and quoted is not None and _default_differs(quoted, param.default):
                        wrong.append(
                            f"{heading}: {name} is {cell.strip()} here, {param.default!r} in {cls.__name__}"
                        )
    assert checked >= 30, f"only {checked} arguments found: did the reference's tables change?"
    assert not wrong, wrong


def table_cells(section: str, header: str) -> list[list[str]]:
    """The cells of each row of the table under ``header`` in ``section``."""
    if header not in section:
        return []
    table = section[section.index(header) :].split("\n\n")[0]
    return [
        [cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in table.splitlines()[2:]
    ]


def _module_of_path(path: str) -> str:
    return "airflow_kafka_failover." + path.removesuffix(".py").replace("/", ".")


def test_the_errors_table_names_the_module_that_defines_each_error():
    import importlib

    (section,) = [text for heading, text in reference_sections() if heading == "## Errors"]
    rows = table_cells(section, "| exception | module | meaning |")
    assert len(rows) >= 6, rows
    wrong = []
    for name_cell, module_cell, _ in rows:
        name, module = name_cell.strip("`"), re.match(r"`([\w.]+)`", module_cell).group(1)
        candidates = [f"airflow_kafka_failover.{module}", f"airflow_kafka_failover.core.{module}"]
        defined = next(
            getattr(importlib.import_module(m), name).__module__
            for m in candidates
            if importlib.util.find_spec(m) and hasattr(importlib.import_module(m), name)
        )
        if not defined.endswith(f".{module}"):
            wrong.append(f"{name} is placed in `{module}`, but defined in {defined}")
    assert not wrong, wrong


def test_the_hooks_table_names_each_hooks_file_base_and_constructor():
    """A row says where its class is defined (a path), what it is built on (``on ... `Base` ``: a base
    class) or wraps (``wraps ... `Other` ``: not a base), and every constructor argument, with its default
    where it quotes one (``name=value``)."""
    import ast
    import importlib

    (section,) = [text for heading, text in reference_sections() if heading == "## Hooks"]
    rows = table_cells(section, "| hook | constructor | provides |")
    assert len(rows) >= 4, rows
    wrong = []
    for hook_cell, constructor, _ in rows:
        name, path = re.match(r"`(\w+)` \(`([\w/]+\.py)`", hook_cell).groups()
        cls = getattr(importlib.import_module(_module_of_path(path)), name)
        if cls.__module__ != _module_of_path(path):
            wrong.append(f"{name} is placed in {path}, but defined in {cls.__module__}")
        bases = {klass.__name__ for klass in cls.__mro__}
        wrong += [
            f"{name} is not built on {b}"
            for b in re.findall(r"\bon [^`;)]*`(\w+)`", hook_cell)
            if b not in bases
        ]
        wrong += [
            f"{name} subclasses {w}, not wraps it"
            for w in re.findall(r"\bwraps [^`;)]*`(\w+)`", hook_cell)
            if w in bases
        ]
        wrong += [
            f"{name} wraps {w}: say so"
            for w in re.findall(r"`(\w+)`, which it wraps", hook_cell)
            if w in bases
        ]
        params = {
            key: param
            for key, param in own_parameters(cls).items()
            if key != "self" and param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL)
        }
        named = dict(re.findall(r"`(\w+)(?:=([^`]+))?`", constructor))
        wrong += [f"{name}'s constructor list lacks {key}" for key in params if key not in named]
        for key, quoted in named.items():
            if quoted and key in params and ast.literal_eval(quoted) != params[key].default:
                wrong.append(f"{name}({key}=...) defaults to {params[key].default!r}, not {quoted}")
    assert not wrong, wrong


def test_what_the_reference_says_about_the_provider_metadata_is_so():
    listed = set(provider_modules())
    claims = 0
    for heading, section in reference_sections():
        text = " ".join(section.split())
        for claim in re.findall(r"\((not )?listed in the provider metadata", text):
            claims += 1
            (name,) = re.findall(r"`([A-Z]\w+)`", heading)
            module = provider_class(name).__module__
            assert (module in listed) != bool(claim), f"{heading}: says {claim or ''}listed; {module} is " + (
                "listed" if module in listed else "not listed"
            )
    assert claims, "the reference no longer says which sensors the provider metadata lists"


def test_the_history_entry_table_names_every_reason_a_switch_records_when_given_none():
    """docs/concepts.md's history entry: the reasons ``steps._default_reason`` writes for an empty Param."""
    from airflow_kafka_failover.switching.steps import _default_reason

    runs = ((True, "manual__1"), (False, "manual__1"), (False, "scheduled__1"), (False, "asset_triggered__1"))
    reasons = {_default_reason("failover", forced, by).replace("failover", "<kind>") for forced, by in runs}
    assert reasons == {"forced", "manual <kind>", "automatic <kind>"}, reasons
    (row,) = [
        line
        for line in (REPO / "docs" / "concepts.md").read_text().splitlines()
        if line.startswith("| `reason` |")
    ]
    assert {reason for reason in reasons if f"`{reason}`" not in row} == set(), row


VERSION_PAGES = ("docs/getting-started.md", "docs/limits.md")
"""The two version tables: what a new user installs on, and what the project supports and tests."""


def version_cell(page: str, part: str) -> str:
    """The second cell (the supported versions) of the row of ``part`` in ``page``'s version table."""
    (row,) = [line for line in (REPO / page).read_text().splitlines() if re.match(rf"^\| {part}\b", line)]
    return row.split(" | ")[1]


def test_the_version_ranges_stated_twice_are_the_ones_pyproject_and_the_job_side_define():
    import tomllib

    from airflow_kafka_failover.jobs.driver_spark import SUPPORTED_SPARK_LINES

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (airflow,) = [d for d in project["dependencies"] if re.match(r"apache-airflow[><=]", d)]
    floor, ceiling = re.fullmatch(r"apache-airflow>=(\d+\.\d+),<(\d+)", airflow).groups()
    python = re.fullmatch(r">=(\d+\.\d+)", project["requires-python"]).group(1)
    expected = {
        "Airflow": (f"{floor}.0 to {int(ceiling) - 1}.x", f"`{airflow}`"),
        "Python": (f"{python} and later", f'`requires-python = "{project["requires-python"]}"`'),
    }
    wrong = []
    for page in VERSION_PAGES:
        for part, claims in expected.items():
            cell = version_cell(page, part)
            wrong += [f"{page}: {part} says {cell!r}, not {claim}" for claim in claims if claim not in cell]
        spark = set(re.findall(r"\b(\d+\.\d+)\.x\b", version_cell(page, "Spark")))
        if spark != set(SUPPORTED_SPARK_LINES):
            wrong.append(f"{page}: Spark lines {sorted(spark)}, the job side accepts {SUPPORTED_SPARK_LINES}")
    kafka = {page: re.match(r"(\d+\.\d+ to \d+\.x)", version_cell(page, "Kafka")) for page in VERSION_PAGES}
    if len({match.group(1) if match else None for match in kafka.values()}) != 1:
        wrong.append(f"the Kafka ranges differ: { {p: m and m.group(1) for p, m in kafka.items()} }")
    assert not wrong, wrong


PATH_CLAIM = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w-]+\.py)\b")
"""A module path as the docs write it: from the repository, the package or its development tools."""


def test_every_module_path_the_docs_and_pyproject_name_exists():
    import airflow

    roots = [REPO, REPO / "airflow_kafka_failover", REPO / "devtools" / "akf_devtools", REPO / "tests"]
    airflow_root = Path(airflow.__file__).parents[1]  # Airflow's own modules, named as airflow/...
    missing, named = [], 0
    for path in [*DOCS, REPO / "pyproject.toml", REPO / "examples" / "pairs.yaml"]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for claim in PATH_CLAIM.findall(line):
                named += 1
                where = [airflow_root] if claim.startswith("airflow/") else roots
                if not any((root / claim).is_file() for root in where):
                    missing.append(f"{path.relative_to(REPO)}:{number}: {claim}")
    assert named >= 50, f"only {named} module paths found: did the pattern stop matching?"
    assert not missing, f"module paths that do not exist: {missing}"
