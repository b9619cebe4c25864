#!/usr/bin/env bash
# measure.sh — which system calls do the tools of the built-in grammars make?
#
# Runs every command of profiles/builtin/tools.yaml (and corral-init, in
# both its modes) through its common forms under strace, as uid 65534 with
# the containers' fixed environment, in a scratch tree; prints one line per
# system call: its name and the tools that made it. The tools are the
# host's own binaries, the ones the default image is assembled from.
#
# Usage (root, strace installed): seccomp/testdata/measure.sh CORRAL_INIT > seccomp/testdata/measured.txt
# CORRAL_INIT is a corral-init built with CGO_ENABLED=0.
#
# What it cannot see: runc's own init between loading the filter and
# execve(2) (a Go runtime, like corral-init's), and code paths no form
# below reaches. default.yaml keeps a reason for every group it allows.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "measure.sh: needs root (strace -u)" >&2; exit 1; }
init=${1:?usage: measure.sh CORRAL_INIT}
init=$(readlink -f "$init")

work=$(mktemp -d /tmp/corral-measure.XXXXXX)
[ -n "${MEASURE_KEEP:-}" ] && echo "measure.sh: traces kept in $work/traces" >&2 || trap 'rm -rf "$work"' EXIT
tree=$work/tree
traces=$work/traces
mkdir -p "$tree" "$traces"

# The scratch repository: text, a binary, nested directories, an in-tree
# symbolic link, a git history (for the opt-in git profile).
(
	cd "$tree"
	mkdir -p src/pkg docs openwiki/pages
	printf 'package main\n\nfunc main() { println("needle") }\n' > src/main.go
	printf 'alpha 3\nbeta 1\nalpha 3\ngamma 2\nneedle here\n' > docs/a.txt
	printf 'alpha 3\nbeta 2\ngamma 2\n' > docs/b.txt
	seq 1 20000 | sort -R > docs/big.txt
	head -c 4096 /dev/urandom > src/blob.bin
	printf '# index\n' > openwiki/index.md
	printf '# page\n' > openwiki/pages/a.md
	ln -s ../docs/a.txt src/link
	printf 'needle\n' > docs/patterns
	git init -q . && git -c user.name=t -c user.email=t@example.com add -A &&
		git -c user.name=t -c user.email=t@example.com commit -qm first &&
		printf 'changed\n' >> docs/a.txt
	chown -R 65534:65534 "$tree"
)

# Forms, one per line: the tool, then its arguments, split on '|'.
forms=$(cat <<'FORMS'
ls
ls|-la
ls|-laR|.
ls|-l|--time-style=full-iso|--full-time|docs
ls|-lZ|src
ls|-i|-s|-h|-n|-1|docs
ls|--color=always|-F|src
ls|-d|-lu|-lc|docs
echo|a|b
cat|docs/a.txt
cat|-A|-n|docs/a.txt|docs/b.txt
head|-n|5|docs/a.txt
head|-c|10|src/blob.bin
head|-n|-2|docs/a.txt
tail|-n|5|docs/a.txt
tail|-c|10|docs/a.txt
tail|-n|+2|docs/big.txt
wc|docs/a.txt
wc|-l|-m|-L|docs/a.txt|docs/b.txt
grep|-rn|needle|.
grep|-ri|NEEDLE|docs
grep|-c|-E|alpha|beta|docs/a.txt
grep|-P|needle\s|-r|.
grep|-l|-r|--include=*.txt|alpha|.
grep|-o|-z|alpha|docs/a.txt
grep|-f|docs/patterns|-A2|-B2|--color=always|-r|.
rg|needle
rg|-n|needle|docs
rg|--files
rg|-uuu|needle
rg|-l|-c|alpha
rg|--json|needle
rg|-P|needle\s
rg|-e|alpha|-e|beta|--sort|path
rg|-g|*.txt|alpha
rg|--type-list
rg|-j1|--mmap|alpha
rg|-U|alpha\nbeta
find
find|.|-name|*.txt
find|-P|.|-type|f|-size|+1k
find|.|-newer|docs/a.txt|-print0
find|.|-maxdepth|1|-empty
find|.|-perm|-u+r|-readable|-writable|-executable
find|.|-user|nobody|-group|nogroup|-nouser
find|.|-regextype|posix-extended|-regex|.*\.go
find|.|-lname|*|-o|-samefile|docs/a.txt
find|.|-mtime|-1|-links|1|-depth
sort|docs/a.txt
sort|-n|-u|-k2|docs/a.txt
sort|-R|docs/a.txt
sort|--parallel=2|-S|1M|docs/big.txt
sort|-h|-V|-r|docs/big.txt
sort|-c|docs/big.txt
sort|-m|docs/a.txt|docs/b.txt
uniq|-c|docs/a.txt
uniq|-d|docs/a.txt
cut|-d|\x20|-f1|docs/a.txt
cut|-c1-3|docs/a.txt
tr|a-z|A-Z
tr|-d|a
diff|docs/a.txt|docs/b.txt
diff|-u|docs/a.txt|docs/b.txt
diff|--no-dereference|-r|docs|src
diff|-y|-q|docs/a.txt|docs/b.txt
diff|--color=always|-u|docs/a.txt|docs/b.txt
stat|docs/a.txt
stat|-L|src/link
stat|-f|.
stat|-c|%n %s|-t|docs/a.txt
file|docs/a.txt
file|-i|src/blob.bin|src/main.go
file|-L|src/link
file|--mime-type|-k|docs|src/link
sed|--sandbox|-n|1,3p|docs/a.txt
sed|--sandbox|s/a/b/g|docs/a.txt
sed|--sandbox|-E|-n|/al+/p|docs/a.txt
sed|--sandbox|-z|-s|p|docs/a.txt|docs/b.txt
cp|docs/a.txt|openwiki/c1.md
cp|-r|docs|openwiki/d1
cp|-p|-u|-n|-v|docs/b.txt|openwiki/c2.md
cp|-f|--remove-destination|docs/b.txt|openwiki/c2.md
cp|-rT|-x|src|openwiki/d2
cp|-t|openwiki|--strip-trailing-slashes|docs/a.txt
mv|openwiki/c1.md|openwiki/c3.md
mv|-f|-v|-t|openwiki/pages|openwiki/c3.md
mv|-n|-u|-T|openwiki/d1|openwiki/d3
mkdir|openwiki/m
mkdir|-p|-v|openwiki/m/a/b/c
touch|openwiki/t.md
touch|-d|2020-01-01|-c|openwiki/t.md
touch|-r|docs/a.txt|-h|openwiki/t.md
touch|-t|202001010000|-a|-m|openwiki/t.md
rm|openwiki/t.md
rm|-r|-v|openwiki/d3
rm|-rf|--preserve-root=all|openwiki/d2
rm|-d|openwiki/m/a/b/c
git|--no-pager|--literal-pathspecs|--no-optional-locks|-c|core.fsmonitor=false|-c|core.hooksPath=/dev/null|-c|core.pager=cat|-c|protocol.allow=never|-c|core.sshCommand=false|-c|credential.helper=|-c|core.alternateRefsCommand=false|-c|color.ui=false|log|--no-ext-diff|--no-textconv|-p|--stat
git|--no-pager|--literal-pathspecs|--no-optional-locks|-c|core.fsmonitor=false|-c|core.hooksPath=/dev/null|-c|core.pager=cat|show|--no-ext-diff|--no-textconv|HEAD
git|--no-pager|--literal-pathspecs|--no-optional-locks|-c|core.fsmonitor=false|-c|core.hooksPath=/dev/null|-c|core.pager=cat|diff|--no-ext-diff|--no-textconv
git|--no-pager|--literal-pathspecs|--no-optional-locks|-c|core.fsmonitor=false|-c|core.hooksPath=/dev/null|blame|--|docs/a.txt
git|--no-pager|--literal-pathspecs|--no-optional-locks|ls-files|-s
git|--no-pager|--literal-pathspecs|--no-optional-locks|grep|--no-textconv|-n|needle
git|--no-pager|--literal-pathspecs|--no-optional-locks|-c|core.fsmonitor=false|status|--porcelain=v2|-uall
FORMS
)

env=(PATH=/usr/bin:/bin LANG=C.UTF-8 HOME=/tmp TMPDIR=/tmp GIT_CONFIG_NOSYSTEM=1
	GIT_CONFIG_GLOBAL=/dev/null GIT_PAGER=cat GIT_TERMINAL_PROMPT=0 GIT_OPTIONAL_LOCKS=0)

n=0
while IFS= read -r line; do
	[ -n "$line" ] || continue
	IFS='|' read -r -a argv <<< "$line"
	for i in "${!argv[@]}"; do argv[$i]=$(printf '%b' "${argv[$i]}"); done
	stdin=/dev/null
	case ${argv[0]} in tr) stdin=$tree/docs/a.txt ;; esac
	n=$((n + 1))
	(cd "$tree" && env -i "${env[@]}" strace -f -qq -u nobody -o "$traces/${argv[0]}.$n" "${argv[@]}" \
		< "$stdin" > /dev/null 2>&1) || true
done <<< "$forms"

# corral-init: exec mode (it execs the tool) and fs mode (the file tools,
# in-process). It runs only as PID 1, so each run gets a PID namespace.
ctl=$work/ctl
mkdir -p "$ctl"
chmod 755 "$work" "$ctl"
printf 'new content\n' > "$ctl/content"
printf 'alpha' > "$ctl/old"
printf 'omega' > "$ctl/new"
chmod 644 "$ctl"/*
sha=$(sha256sum "$tree/docs/b.txt" | cut -d' ' -f1)
i=0
while IFS= read -r req; do
	[ -n "$req" ] || continue
	i=$((i + 1))
	printf '%s' "$req" > "$ctl/req$i"
	chmod 644 "$ctl/req$i"
	(cd "$tree" && env -i "${env[@]}" strace -f -qq -o "$traces/corral-init.$i" \
		unshare --pid --fork --kill-child -- setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$init" "$ctl/req$i" < /dev/null > /dev/null 2>&1) || true
done <<EOF2
{"version":2,"mode":"exec","deadline_ms":10000,"argv":["ls","-la"]}
{"version":2,"mode":"fs","deadline_ms":10000,"argv":["read","--","docs/a.txt"]}
{"version":2,"mode":"fs","deadline_ms":10000,"argv":["read","--offset","1","--limit","2","--","docs/big.txt"]}
{"version":2,"mode":"fs","deadline_ms":10000,"argv":["list","--","."]}
{"version":2,"mode":"fs","deadline_ms":10000,"argv":["glob","--","**/*.txt"]}
{"version":2,"mode":"fs","deadline_ms":10000,"argv":["search","--include","*.txt","--ignore-case","--","alpha","."]}
{"version":2,"mode":"fs","deadline_ms":10000,"argv":["write","--content","$ctl/content","--","openwiki/new/w.md"]}
{"version":2,"mode":"fs","deadline_ms":10000,"argv":["edit","--old","$ctl/old","--new","$ctl/new","--expect-sha256","$sha","--","docs/b.txt"]}
EOF2

# corral-init's own traces hold unshare's and setpriv's calls too. unshare
# (the first pid) only forks and waits: drop it. setpriv execs corral-init
# in its own pid: keep that pid from the execve on. Every other pid is a
# thread or child made after that execve (clone returns namespace pids, so
# parents cannot be matched by number).
for f in "$traces"/corral-init.*; do
	awk -v init="$init" '
		NR == 1 { outer = $1 }
		$2 == "execve(\"" init "\"," { root = $1 }
		$1 == outer || ($1 != root && root == "") { next }
		{ print }
	' "$f" > "$f.kept"
	mv "$f.kept" "$f"
done

# One line per system call: name, then the tools that made it.
for f in "$traces"/*; do
	tool=$(basename "$f")
	tool=${tool%%.*}
	# "PID name(" and "PID <... name resumed>"; signals and exits carry no name(.
	sed -nE 's/^[0-9]+ +(<\.\.\. )?([a-z0-9_]+)(\(| resumed>).*/\2/p' "$f" | sort -u | sed "s/\$/ $tool/"
done | sort -u | awk '{ t[$1] = t[$1] ? t[$1] "," $2 : $2 } END { for (s in t) print s, t[s] }' | sort
