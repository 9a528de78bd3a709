#!/usr/bin/env bash
# Installs everything the project needs on a machine with Python 3.11+, Java 17 and Maven:
# a virtualenv in .venv with the provider (with every extra, and the `dev` dependency group of pyproject.toml:
# the test and lint tools) and the development tools of devtools/ (sandbox,
# demo, local Airflow), both editable, and the JVM artifacts resolved by Maven into .jars/. Idempotent: each step is skipped when its inputs did not change since it last succeeded.
#
# Options: --browser (make test) installs Debian's chromium for the Airflow UI test; --all-jars (make test)
# resolves every JVM artifact set the tests use (Delta, the Hadoop minicluster, S3A with its 560 MB AWS SDK
# bundle), where the default resolves only the demo's (Kafka, Spark's Kafka source); --no-jars (make
# test-fast) resolves none; --compat (make test) also makes the lanes' three virtualenvs:
# .venv-compat, the lowest Airflow the provider supports (tests/compat/requirements.in, pinned by
# constraints-compat.txt) with the provider and the development tools, both editable; and
# .venv-compat-driver, its Spark driver: the oldest Spark and Delta the job side supports, without Airflow
# (tests/compat/requirements-driver.in, pinned by constraints-compat-driver.txt); and .venv-newest-driver,
# the newest Spark and Delta it supports, also without Airflow (tests/compat/requirements-newest-driver.in,
# pinned by constraints-newest-driver.txt). The lanes' jars (Kafka, Spark's Kafka source and Delta for that
# Spark, from jvm/compat/ and jvm/newest-spark/) are resolved by their tests.
set -euo pipefail
cd "$(dirname "$0")/.."

browser=false
compat=false
jars=demo
for arg in "$@"; do
  case "$arg" in
    --browser) browser=true ;;
    --all-jars) jars=all ;;
    --no-jars) jars=none ;;
    --compat) compat=true ;;
    *) echo "error: unknown option $arg (use --browser, --all-jars, --no-jars or --compat)" >&2; exit 2 ;;
  esac
done

PYTHON=${PYTHON:-python3}
need() { command -v "$1" >/dev/null 2>&1 || { echo "error: $1 not found: $2" >&2; exit 1; }; }
need "$PYTHON" "install Python 3.11 or newer (or set PYTHON=/path/to/python3.11)"
need java "install a Java 17 JDK, e.g. 'apt-get install openjdk-17-jdk'"
need mvn "install Apache Maven 3.8+, e.g. 'apt-get install maven'"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "error: $PYTHON is $("$PYTHON" -V 2>&1); Python 3.11 or newer is required" >&2; exit 1; }
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
[ "${java_major:-0}" -ge 17 ] || { echo "error: java is version ${java_major:-unknown}; Java 17 or newer is required" >&2; exit 1; }

# With --browser (make test): the Airflow UI test drives Debian's Chromium through Playwright (browser
# downloads are not used). Skipped when /usr/bin/chromium exists; otherwise apt-get, as root or through sudo.
if [ "$browser" = true ] && [ ! -x /usr/bin/chromium ]; then
  chromium_packages="chromium chromium-driver fonts-dejavu-core"
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "error: /usr/bin/chromium is missing and apt-get needs root (no sudo here);" \
      "install it with 'sudo apt-get install $chromium_packages' and run 'make setup' again" >&2
    exit 1
  fi
  echo "setup: installing $chromium_packages with apt-get (for the Airflow UI test)"
  ${as_root[@]+"${as_root[@]}"} apt-get update -q \
    && ${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $chromium_packages \
    || { echo "error: apt-get could not install $chromium_packages; install them by hand and run 'make setup' again" >&2; exit 1; }
  [ -x /usr/bin/chromium ] \
    || { echo "error: apt-get succeeded but /usr/bin/chromium is still missing; install Debian's 'chromium' package" >&2; exit 1; }
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi

# pyspark and pyspark-client exist on PyPI only as sdists, and uv built them again on every install (30 s:
# its cache keeps each build under a new revision and never reuses it). Their wheels are built once per
# version into a wheelhouse beside uv's own cache (AKF_WHEELHOUSE overrides it), which uv then installs.
wheelhouse=${AKF_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/airflow-kafka-failover/wheels}
build_sdist_only_wheels() {  # $1: the constraints file whose pyspark pins to build
  mkdir -p "$wheelhouse"
  local pin name version
  for pin in $(grep -E '^pyspark(-client)?==' "$1"); do
    name=${pin%%==*} version=${pin##*==}
    if ! ls "$wheelhouse/${name//-/_}-$version-"*.whl >/dev/null 2>&1; then
      echo "setup: building the wheel of $pin once into $wheelhouse (PyPI has only its sdist)"
      .venv/bin/python -m pip wheel -q --disable-pip-version-check --no-deps -w "$wheelhouse" "$pin"
    fi
  done
}

make_driver_venv() {  # $1: the virtualenv, $2: its requirements, $3: their constraints, $4: oldest or newest
  [ -x "$1/bin/python" ] || { echo "setup: creating $1"; .venv/bin/uv venv -q --python "$(.venv/bin/python -c 'import sys; print(sys.executable)')" "$1"; }
  local driver_stamp="$1/.akf-installed" driver_want
  driver_want=$(cat pyproject.toml "$2" "$3" | sha256sum | cut -d' ' -f1)
  if [ ! -f "$driver_stamp" ] || [ "$(cat "$driver_stamp")" != "$driver_want" ]; then
    echo "setup: installing the $4 supported Spark with the job side into $1 (a lane's Spark driver)"
    build_sdist_only_wheels "$3"
    .venv/bin/uv pip install -q --python "$1/bin/python" -c "$3" --find-links "$wheelhouse" -r "$2"
    .venv/bin/uv pip install -q --python "$1/bin/python" --no-deps -e .
    echo "$driver_want" > "$driver_stamp"
  fi
}

stamp=.venv/.akf-installed
want=$(cat pyproject.toml devtools/pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing the provider and the development tools into .venv (about a minute the first time)"
  # constraints.txt pins every package to the versions last tested (refreshed by 'make constraints'), uv too.
  # uv (from PyPI, into .venv) installs the pinned set several times faster than pip (README, "Setup times");
  # pip stays in .venv for 'make constraints'. No .pyc files at install (compiling all 1.6 GB took 35 of its
  # 73 s): Python writes them for the modules a run imports, which the Makefile allows even where
  # PYTHONDONTWRITEBYTECODE is set (it unexports it).
  .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt uv
  build_sdist_only_wheels constraints.txt
  .venv/bin/uv pip install -q --python .venv/bin/python -c constraints.txt --find-links "$wheelhouse" \
    -e '.[spark,delta,s3,kubernetes]' --group dev -e './devtools[demo]'
  .venv/bin/python -c 'import pyspark' \
    || { echo "error: 'import pyspark' fails in .venv (two packages writing the pyspark folder?); remove .venv and run 'make setup' again" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

if [ "$compat" = true ]; then
  [ -x .venv-compat/bin/python ] || { echo "setup: creating .venv-compat"; .venv/bin/uv venv -q --python "$(.venv/bin/python -c 'import sys; print(sys.executable)')" .venv-compat; }
  compat_stamp=.venv-compat/.akf-installed
  compat_want=$(cat pyproject.toml devtools/pyproject.toml tests/compat/requirements.in constraints-compat.txt | sha256sum | cut -d' ' -f1)
  if [ ! -f "$compat_stamp" ] || [ "$(cat "$compat_stamp")" != "$compat_want" ]; then
    echo "setup: installing the lowest supported Airflow with the provider into .venv-compat (the compatibility lane)"
    build_sdist_only_wheels constraints-compat.txt
    .venv/bin/uv pip install -q --python .venv-compat/bin/python -c constraints-compat.txt \
      --find-links "$wheelhouse" -r tests/compat/requirements.in --group dev
    echo "$compat_want" > "$compat_stamp"
  fi
  # The lanes' Spark drivers, without Airflow; the provider's package goes in without its dependencies, as
  # docs/jobs.md says: .venv-compat-driver, the oldest Spark line the job side supports
  # (tests/compat/requirements-driver.in), and .venv-newest-driver, the newest
  # (tests/compat/requirements-newest-driver.in).
  make_driver_venv .venv-compat-driver tests/compat/requirements-driver.in constraints-compat-driver.txt "oldest"
  make_driver_venv .venv-newest-driver tests/compat/requirements-newest-driver.in constraints-newest-driver.txt "newest"
fi

case "$jars" in
  demo) .venv/bin/python -m akf_devtools.sandbox.jars ;;
  all) .venv/bin/python -m akf_devtools.sandbox.jars --all ;;
  none) ;;
esac
