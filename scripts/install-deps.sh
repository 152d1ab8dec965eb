#!/usr/bin/env bash
# Installs the Debian tools mesh's tests use (the real git http-backend, ssh-keygen, dpkg,
# apt-get, useradd, systemctl, openssl for the self-signed certificates of the https tests,
# chromium-headless-shell for the test that renders the status page in a real browser;
# debootstrap, systemd-nspawn and dpkg-repack for the system tests' Debian container), only
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
)
missing=()
for tool in "${!provides[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${provides[$tool]}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<20||(a===20&&b<19)) { console.error("mesh needs Node.js >= 20.19 (found "+process.versions.node+")"); process.exit(1) }'
