"""Write ``server_ref/apache_broker_configs.tsv``: Apache Kafka's broker configs, as facts.

Kafka itself is asked, through ``jshell`` on the cached jars (``tools/apache_kafka.py``):
every non-internal key of the broker's config definition with its type, its default as
DescribeConfigs renders it, its validator's description (``[1,...]``, ``[a, b]``...), and
whether it can be changed at run time (``per-broker``, ``cluster-wide``) or not
(``read-only``), plus the security configs Kafka only takes with a listener prefix. The
reference broker accepts, refuses and describes broker configs from this table.

    python tools/apache_broker_configs.py [--version 4.3.1] [--check]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.apache_kafka import DEFAULT_VERSION, classpath, fetch  # noqa: E402

OUTPUT = ROOT / "server_ref" / "apache_broker_configs.tsv"
COLUMNS = ("name", "type", "default", "validator", "mode", "listener_prefix_only")

# Run by jshell: one tab-separated line per config; "\N" stands for a null default.
_SCRIPT = r"""
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.server.config.DynamicBrokerConfig;
var modes = DynamicBrokerConfig.dynamicConfigUpdateModes();
var prefixed = DynamicBrokerConfig.DYNAMIC_SECURITY_CONFIGS;
var out = new StringBuilder();
for (var key : kafka.server.KafkaConfig$.MODULE$.configDef().configKeys().values()) {
  if (key.internalConfig) continue;
  String shown = key.hasDefault() ? ConfigDef.convertToString(key.defaultValue, key.type) : null;
  String rule = key.validator == null ? "" : key.validator.toString();
  out.append(key.name).append('\t').append(key.type).append('\t')
     .append(shown == null ? "\\N" : shown.replace('\t', ' ').replace('\n', ' ')).append('\t')
     .append(rule.replace('\t', ' ').replace('\n', ' ')).append('\t')
     .append(modes.getOrDefault(key.name, "read-only")).append('\t')
     .append(prefixed.contains(key.name) ? "true" : "false").append('\n');
}
java.nio.file.Files.writeString(java.nio.file.Path.of(System.getProperty("out")), out.toString());
/exit
"""


def dump(version: str) -> str:
    fetch(version)
    with tempfile.TemporaryDirectory() as tmp:
        script, out = Path(tmp) / "dump.jsh", Path(tmp) / "configs.tsv"
        script.write_text(_SCRIPT)
        result = subprocess.run(
            ["jshell", "-J-Xmx256m", f"-J-Dout={out}", f"-R-Dout={out}",
             "--class-path", classpath(version), str(script)],
            capture_output=True, text=True, timeout=600)
        if not out.exists():
            raise SystemExit(f"jshell wrote nothing: {result.stdout[-2000:]}"
                             f"{result.stderr[-2000:]}")
        rows = sorted(line for line in out.read_text().splitlines() if line)
    header = (f"# Apache Kafka {version} broker configs, written by tools/apache_broker_configs.py"
              " (do not edit)\n" + "\t".join(COLUMNS) + "\n")
    return header + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default=DEFAULT_VERSION)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the checked-in table differs from Kafka's")
    args = parser.parse_args(argv)
    text = dump(args.version)
    if args.check:
        same = OUTPUT.exists() and OUTPUT.read_text() == text
        print("up to date" if same else f"{OUTPUT} differs from Apache Kafka {args.version}")
        return 0 if same else 1
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT} ({text.count(chr(10)) - 2} configs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
