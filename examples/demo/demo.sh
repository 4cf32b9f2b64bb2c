#!/usr/bin/env bash
# The offline demo behind `make demo`: the three Penguin services run as
# separate processes on loopback ports, as in a deployment, and a scripted
# stand-in for the model (`penguin mockllm` playing script.yaml) fixes a
# bug in a temporary copy of examples/demo/workspace. The model is
# scripted; everything else is real: the engine's agent loop, the llm
# gateway speaking the OpenAI wire format to the stand-in, and the
# environment editing files and running the test.
#
# PENGUIN names the binary (default bin/penguin, which `make demo` builds).
# DEMO_KEEP=1 keeps the temporary directory (logs, workspace, database).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
penguin="${PENGUIN:-$here/../../bin/penguin}"
if [[ ! -x "$penguin" ]]; then
	echo "demo: $penguin is missing; run \`make build\` first (or set PENGUIN)" >&2
	exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/penguin-demo.XXXXXX")"
mkdir -p "$work/workspace" "$work/logs" "$work/home"
cp "$here"/workspace/* "$work/workspace/"

pids=()
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	if ((${#pids[@]} > 0)); then
		kill -TERM "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
	fi
	if [[ "${DEMO_KEEP:-}" == 1 ]]; then
		echo "demo: kept $work"
	else
		rm -rf "$work"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME ARGS... runs `penguin ARGS...` in the background, logging to
# $work/logs/NAME.log.
start() {
	local name=$1
	shift
	"$penguin" "$@" >"$work/logs/$name.log" 2>&1 &
	pids+=("$!")
}

# listening NAME MESSAGE FIELD waits (at most 30 s) for the log line MESSAGE
# of process NAME and prints the value of FIELD in it.
listening() {
	local name=$1 msg=$2 field=$3 value=""
	for _ in $(seq 1 300); do
		value="$(sed -n "s/.*msg=\"$msg\".* $field=\([^ ]*\).*/\1/p" "$work/logs/$name.log" | head -n 1)"
		if [[ -n "$value" ]]; then
			echo "$value"
			return 0
		fi
		sleep 0.1
	done
	echo "demo: $name did not start; its log:" >&2
	cat "$work/logs/$name.log" >&2
	return 1
}

bold=$'\e[1m' dim=$'\e[2m' reset=$'\e[0m'
if [[ ! -t 1 || -n "${NO_COLOR:-}" ]]; then bold="" dim="" reset=""; fi

cat <<EOF
${bold}Penguin demo${reset}

${bold}The model in this demo is scripted.${reset} No real model is called: \`penguin mockllm\`
plays the turns written in examples/demo/script.yaml, over the real OpenAI
wire format. The services, the file edits and the test run are real.

EOF

export PENGUIN_LOG_FORMAT=text PENGUIN_LOG_LEVEL=info
start mockllm mockllm --listen 127.0.0.1:0 --script "$here/script.yaml"
mock_url="$(listening mockllm "mockllm listening" url)"

cat >"$work/providers.yaml" <<EOF
providers:
  - name: scripted
    type: openai
    base_url: $mock_url/v1
    api_key_env: DEMO_API_KEY
EOF
export DEMO_API_KEY=not-a-real-key

start llm serve llm --listen 127.0.0.1:0 --providers "$work/providers.yaml"
start environment serve environment --listen 127.0.0.1:0 --root "$work"
llm_addr="$(listening llm "gRPC server listening" addr)"
env_addr="$(listening environment "gRPC server listening" addr)"
start engine serve engine --listen 127.0.0.1:0 --llm "$llm_addr" --environment "$env_addr" --home "$work/home"
engine_addr="$(listening engine "gRPC server listening" addr)"

cat <<EOF
${dim}  mockllm      $mock_url  (the scripted model)
  llm          $llm_addr
  environment  $env_addr  (root $work)
  engine       $engine_addr
  logs         $work/logs${reset}

${bold}The workspace:${reset} add.sh should add two numbers; test.sh checks it.
${dim}\$ sh test.sh${reset}
EOF
(cd "$work/workspace" && sh test.sh) || true

prompt="test.sh fails. Fix add.sh so that the test passes."
cat <<EOF

${bold}\$ penguin run --engine $engine_addr --provider scripted --model demo "$prompt"${reset}

EOF
"$penguin" run --engine "$engine_addr" --provider scripted --model demo \
	--workspace "$work/workspace" --approval allow-all "$prompt"

cat <<EOF

${bold}What changed on disk:${reset}
EOF
diff -u "$here/workspace/add.sh" "$work/workspace/add.sh" | sed '1,2d' || true
echo
echo "${dim}\$ sh test.sh${reset}"
(cd "$work/workspace" && sh test.sh)
cat <<EOF

${bold}Done.${reset} Again, the model was scripted; to use a real one, see "Use a real
model" in README.md.
EOF
