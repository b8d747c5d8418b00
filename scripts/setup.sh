#!/usr/bin/env bash
# Install what Ferry needs, and only what is missing:
#   - Debian packages: python3-ipykernel (a kernel to run) and, for `test`, python3-jupyter-server
#     (the reference client), python3-numpy (the speed check's tests measure with it), python3-nbclient
#     (the reference notebook executor jobs are compared with), chromium (the
#     browser the JupyterLab tests drive), jupyterhub (a real JupyterHub 3 the gateway signs users
#     in through as a Hub service), and slurm-wlm slurmctld slurmd slurm-client munge
#     slurmrestd slurm-wlm-jwt-plugin (a real Slurm, with its REST API, for the Slurm engine's tests).
#     Installed with apt-get when running as root; otherwise named.
#   - npm dependencies: `npm ci` when node_modules is missing or older than package-lock.json.
# Usage: scripts/setup.sh [start|test]
set -euo pipefail
cd "$(dirname "$0")/.."
purpose="${1:-start}"

missing=()
python_has() { /usr/bin/python3 -c "import $1" >/dev/null 2>&1; }
python_has ipykernel || missing+=(python3-ipykernel)
if [ "$purpose" = test ]; then
  python_has jupyter_server || missing+=(python3-jupyter-server)
  python_has numpy || missing+=(python3-numpy)
  # The reference executor the jobs' results are compared with (kernel-gateway/test/jobs-reference.spec.ts).
  python_has nbclient || missing+=(python3-nbclient)
  # The browser tests drive Debian's Chromium through playwright-core; never a downloaded browser.
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  # A real JupyterHub for `--auth jupyterhub` (kernel-gateway/test/jupyterhub.spec.ts).
  command -v jupyterhub >/dev/null || missing+=(jupyterhub)
fi
# A real single-node Slurm cluster for the Slurm engine's tests (kernel-gateway/test/slurm.spec.ts);
# optional: without them (or without root) those tests skip and say why.
optional=()
if [ "$purpose" = test ] && command -v dpkg-query >/dev/null; then
  for package in slurm-wlm slurmctld slurmd slurm-client munge slurmrestd slurm-wlm-jwt-plugin; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
      optional+=("$package")
  done
fi
if [ ${#optional[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    missing+=("${optional[@]}")
  else
    echo "setup: the Slurm tests will skip without: ${optional[*]} (and root)" >&2
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing Debian packages: ${missing[*]} (run: sudo apt-get install ${missing[*]})" >&2
    [ "$purpose" = test ] && exit 1
  fi
fi

if [ ! -d node_modules ] || [ ! -f node_modules/.package-lock.json ] ||
  [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm dependencies"
  npm ci --no-audit --no-fund
fi
