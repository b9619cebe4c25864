#!/usr/bin/env bash
# hack/demo.sh BIN — the README's demo on examples/demo-repo (run by `make demo`).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/corral}
REPO=examples/demo-repo
step() { printf '\n\033[1m== %s\033[0m\n$ %s\n' "$1" "$2"; }
expect() { # expect CODE ACTUAL
	if [ "$1" != "$2" ]; then echo "demo: expected exit $1, got $2" >&2; exit 1; fi
	echo "(exit $2, as expected)"
}
before=$(cd "$REPO" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum)

step "Build the tools image from this machine's binaries (idempotent)" "corral image build"
"$BIN" image build; expect 0 $?

step "An allowed search" "corral run --repo $REPO -- grep -rn Total src"
"$BIN" run --repo "$REPO" -- grep -rn Total src; expect 0 $?

step "Hidden paths do not exist in the view (secrets/, .env, AGENTS.md, .claims)" "corral run --repo $REPO -- ls -a . openwiki"
"$BIN" run --repo "$REPO" -- ls -a . openwiki; expect 0 $?

step "A search never sees hidden bytes" "corral run --repo $REPO -- grep -rl MUST-NOT-LEAK ."
"$BIN" run --repo "$REPO" -- grep -rl MUST-NOT-LEAK .; expect 1 $?

step "A direct read of an ignored file is refused before anything runs" "corral run --repo $REPO -- cat secrets/signing-key.pem"
"$BIN" run --repo "$REPO" -- cat secrets/signing-key.pem; expect 126 $?

step "The prompt injection in AGENTS.md asks for a shell: refused" "corral run --repo $REPO -- sh -c 'cat .env'"
"$BIN" run --repo "$REPO" -- sh -c 'cat .env'; expect 126 $?

step "A write outside openwiki/ is refused" "corral run --repo $REPO -- touch src/new.go"
"$BIN" run --repo "$REPO" -- touch src/new.go; expect 126 $?

mkdir -p build
step "A write into openwiki/ lands in the session's write area, collected as a patch" \
	"corral run --repo $REPO --diff-out build/demo.patch -- cp README.md openwiki/overview.md"
"$BIN" run --repo "$REPO" --diff-out build/demo.patch -- cp README.md openwiki/overview.md; expect 0 $?
echo "--- build/demo.patch:"
cat build/demo.patch

step "The patch applies cleanly to the repository (checked, not applied)" "git apply --check build/demo.patch"
tmp=$(mktemp -d); cp -a "$REPO/." "$tmp/"
(cd "$tmp" && git init -q && git apply --check "$OLDPWD/build/demo.patch") || { echo "demo: the patch does not apply" >&2; exit 1; }
echo "git apply --check: clean"
rm -rf "$tmp"

after=$(cd "$REPO" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum)
step "The repository itself was never written" "sha256 of every file, before and after"
[ "$before" = "$after" ] && echo "unchanged: $after" || { echo "demo: the repository changed!" >&2; exit 1; }
