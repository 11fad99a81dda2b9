#!/usr/bin/env bash
# Installs what the interop tests (interop/) need, and curl, which the
# gateway guide's commands use (cmd/handoff TestREADME_Gateway): the system Python 3 with
# Debian's jwcrypto, cbor2 and cryptography packages, which the independent
# peer (interop/peer/peer.py) uses. Idempotent: when every package is already
# installed it changes nothing and does not touch the package lists.
set -euo pipefail

pkgs=(python3 python3-jwcrypto python3-cbor2 python3-cryptography curl)

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

if ((${#missing[@]} > 0)); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "interop.sh: missing ${missing[*]}; run as root to install them" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi

# The peer runs under the system interpreter explicitly: a python3 found
# first on PATH (pyenv and the like) may not see Debian's packages.
/usr/bin/python3 -c 'import jwcrypto, cbor2, cryptography' || {
	echo "interop.sh: /usr/bin/python3 cannot import jwcrypto, cbor2 and cryptography" >&2
	exit 1
}
echo "interop.sh: /usr/bin/python3 with jwcrypto, cbor2 and cryptography is ready"
