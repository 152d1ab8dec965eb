#!/usr/bin/env bash
# Installs the Debian tools mesh's tests use (the real git http-backend, ssh-keygen, dpkg,
# apt-get, useradd, systemctl, openssl for the self-signed certificates of the https tests,
# chromium-headless-shell for the test that renders the status page in a real browser;
# debootstrap, systemd-nspawn and dpkg-repack for the system tests' Debian container; apache2 for
# the tests of a fleet behind Apache httpd, test/apache.test.ts, and gitolite3 for the one behind
# gitolite in its HTTP mode, test/gitolite.test.ts), only
# those that are missing. Needs root (or sudo).
set -euo pipefail
declare -A provides=(
  [git]=git
  [ssh-keygen]=openssh-client
  [dpkg-deb]=dpkg
  [dpkg-scanpackages]=dpkg-dev
  [apt-get]=apt
  [useradd]=passwd
  [systemctl]=systemd
  [openssl]=openssl
  [chromium-headless-shell]=chromium-headless-shell
  [debootstrap]=debootstrap
  [systemd-nspawn]=systemd-container
  [dpkg-repack]=dpkg-repack
  [age]=age
  [apache2]=apache2
  [gitolite]=gitolite3
)
missing=()
for tool in "${!provides[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || missing+=("${provides[$tool]}")
done
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
updated=no
apt_install() {
  [ "$updated" = yes ] || { $sudo apt-get update -qq; updated=yes; }
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@"
}
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt_install "${missing[@]}"
fi
# Node.js >= 20.19 and npm. Debian 13's own nodejs is new enough and is installed from Debian with
# its npm; Debian 12's is 18, too old, and NodeSource's packages are the way there (they bring npm).
node_ok() { command -v node >/dev/null 2>&1 && node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)'; }
if ! node_ok; then
  [ "$updated" = yes ] || { $sudo apt-get update -qq; updated=yes; }
  candidate="$(apt-cache policy nodejs 2>/dev/null | awk '/Candidate:/ {print $2}')"
  if [ -n "$candidate" ] && [ "$candidate" != "(none)" ] && dpkg --compare-versions "$candidate" ge 20.19; then
    echo "installing Debian's nodejs $candidate and npm"
    apt_install nodejs npm
  fi
fi
if ! node_ok; then
  found="$(command -v node >/dev/null 2>&1 && node --version || echo none)"
  . /etc/os-release 2>/dev/null || true
  echo "mesh needs Node.js >= 20.19 (found: $found)." >&2
  case "${VERSION_CODENAME:-}" in
    bookworm) echo "On Debian 12 (bookworm) Debian's own nodejs is 18: install Node 20 from NodeSource's Debian packages instead:
  apt-get install -y curl ca-certificates && curl -fsSL https://deb.nodesource.com/setup_20.x | bash - && apt-get install -y nodejs
(the system tests copy that nodejs package into their Debian 12 machine with dpkg-repack), then run this script again." >&2 ;;
    *) echo "This release's own nodejs is older than 20.19: install Node >= 20.19 (NodeSource's Debian packages, for example), then run this script again." >&2 ;;
  esac
  exit 1
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "installing npm (Debian's, for its nodejs)"
  apt_install npm
fi
