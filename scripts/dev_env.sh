#!/usr/bin/env bash
# A development venv (.venv/) with the core and every plugin installed editable, plus their test
# extras: `bash scripts/dev_env.sh`, then `. .venv/bin/activate && pytest plugins/ppo/tests`.
# Plugins are installed in dependency order (pip 23 does not resolve editable siblings in one pass).
# Torch comes from wherever pip is configured, pinned by constraints.txt.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
venv=${RLF_DEV_VENV:-$root/.venv}
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt)
"${pip[@]}" -e '.[test]' pytest
# providers first: the plugins others build on
for name in predator_prey actor_critic ppo; do "${pip[@]}" --no-deps -e "plugins/$name"; done
for dir in plugins/*/; do "${pip[@]}" --no-deps -e "$dir"; done
# then each plugin with its extras and third-party dependencies, now that every rlf-plugin-* is present
args=()
for dir in plugins/*/; do
  if grep -Eq '^test *=' "$dir/pyproject.toml"; then args+=(-e "${dir%/}[test]"); else args+=(-e "${dir%/}"); fi
done
"${pip[@]}" "${args[@]}"
echo "dev_env: ready in $venv"
