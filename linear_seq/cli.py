"""One-line errors for the entry points: a user mistake prints `error: ...` and exits 1, without a traceback
(--verbose prints it too). Programming errors keep their traceback."""
import contextlib
import os
import sys
import traceback
from typing import Iterator

from absl import flags
from ml_collections import config_flags

from linear_seq import config_lib


def define_verbose_flag() -> None:
  if "verbose" not in flags.FLAGS:
    flags.DEFINE_bool("verbose", False, "Print the traceback of an error, not only its one-line message.")


def define_dry_run_flag(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  if "dry_run" not in flag_values:
    flags.DEFINE_bool("dry_run", False, "Parse the flags and load the config, print what would run, and exit 0 "
                      "without touching the workdir or compiling anything (the README's command test uses it).",
                      flag_values=flag_values)


def exit_if_dry_run(what: str, flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """With --dry_run: prints `dry run: <what>` and exits 0 (called once the flags and config are checked)."""
  if "dry_run" in flag_values and flag_values.dry_run:
    print(f"dry run: {what}", flush=True)
    sys.exit(0)


def fail(message: str) -> None:
  sys.stderr.write(f"error: {message}\n")
  sys.stderr.flush()
  sys.exit(1)


@contextlib.contextmanager
def one_line_errors(*types: type) -> Iterator[None]:
  """Turns the exception `types` raised inside into `error: <message>` + exit code 1."""
  try:
    yield
  except types as e:  # pylint: disable=catching-non-exception
    if flags.FLAGS.is_parsed() and "verbose" in flags.FLAGS and flags.FLAGS.verbose:
      traceback.print_exc()
    fail(str(e).strip() or type(e).__name__)


def load_config_flag(name: str = "config"):
  """FLAGS.<name> of config_flags.DEFINE_config_file, or one error line if the file does not load (config_flags
  defers the error to the first use of the config)."""
  config = getattr(flags.FLAGS, name)
  try:
    config.keys()
  except Exception as e:  # pylint: disable=broad-except  (whatever the config file raised)
    try:
      filename = config_flags.get_config_filename(flags.FLAGS[name])
    except Exception:  # pylint: disable=broad-except
      filename = "?"
    if filename != "?" and not os.path.exists(filename):
      fail(f"--{name}: the config file {filename!r} does not exist")
    cause = e
    while cause.__cause__ is not None:
      cause = cause.__cause__
    lines = [l.strip() for l in str(cause).strip().splitlines() if l.strip()]
    fail(f"--{name}: cannot load {filename!r}: {type(cause).__name__}: {lines[-1] if lines else ''}")
  return config


def parse_flags(argv: list[str]) -> list[str]:
  """app.run's flags_parser: a bad flag value is `error: <absl's message>` and exit 1; with a config_flags
  --config, a --config.a.b=value override naming no field (config_flags raises a KeyError or AttributeError
  while parsing) is one error line with the nearest valid name (config_lib's message), not a traceback."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    if "--verbose" in argv:
      traceback.print_exc()
    # A config file that raises while config_flags parses --config: config_lib's one line, not the traceback
    # config_flags puts into its message.
    config_error = _override_error(argv) if str(e).startswith("flag --config") else None
    fail(config_error or f"{e} (--helpshort lists the flags)")
    raise  # (not reached)
  except Exception as e:  # pylint: disable=broad-except  (whatever a config file raises while it is parsed)
    if "--verbose" in argv:
      traceback.print_exc()
    fail(_override_error(argv) or " ".join(str(e).replace("\\n", " ").strip("'\"").split()))
    raise  # (not reached)


def _override_error(argv: list[str]) -> str | None:
  """config_lib's message for the --config=FILE and --config.x=v arguments in argv (None if they are fine)."""
  spec = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), None)
  if spec is None and "--config" in argv[:-1]:
    spec = argv[argv.index("--config") + 1]
  try:
    overrides, _ = config_lib.override_args([a for a in argv[1:] if a.startswith("--config.")])
    config_lib.apply_overrides(config_lib.load_config(spec), overrides)
  except ValueError as e:  # config_lib's and the config files' own messages
    return str(e)
  except Exception as e:  # pylint: disable=broad-except  (whatever the config file raises: its last line)
    return f"--config: cannot load {spec!r}: {exception_line(e)}"
  return None


def exception_line(e: BaseException) -> str:
  """'Type: last line of the message' of an exception raised by user code (a config or plug-in file);
  a SyntaxError's message names the file and line."""
  lines = [l.strip() for l in str(e).strip().splitlines() if l.strip()]
  return f"{type(e).__name__}: {lines[-1] if lines else ''}".rstrip(": ")
