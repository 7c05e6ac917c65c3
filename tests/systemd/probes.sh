#!/bin/bash
# probes.sh KIT_DIR -- issue 22's four probes, for real, in the container that tests/systemd/run-test.sh left running.
#
# Run after `SYSD_KEEP=1 KIT_DIR/run-test.sh CHECKOUT` (which boots the container, installs the checkout as
# `tester` in ~/v and ends with the service uninstalled); tests/test_systemd_e2e.py does exactly that, then
# `run-test.sh --stop`. Uses the kit's lib.sh (leader_pid, cx, ux). Prints PASS/FAIL per probe, exit 0 when all
# pass; the transcript goes to $SYSD_STATE/results/probes-<time>/transcript.txt.
#
#   P1 the service finds an openclaw that is only in ~/.local/bin (the user's PATH, not the manager's)
#   P2 a shell without a logind session (runuser; env -i like cron: no XDG_RUNTIME_DIR, USER, LOGNAME) sees the
#      running daemon, cannot start a second one (exit 75), and doctor / service status reach the user manager
#   P3 linger found with USER/LOGNAME unset (and "not lingering" said when it is off)
#   P4 an active but disabled unit is flagged by doctor
#   P6 the journal: the daemon's own lines in `occd service logs` and `occd logs --journal` (the kit's check 5,
#      whose wait loop does not run: see P6)
#   P5 uninstall with nothing installed says "not installed"; the real uninstall leaves nothing behind
set -uo pipefail
KIT=${1:?usage: probes.sh KIT_DIR}
KIT=$(cd "$KIT" && pwd)
. "$KIT/lib.sh"
[ "$(id -u)" = 0 ] || die "run as root"
[ -n "$(leader_pid)" ] || die "no container $MACHINE running: run SYSD_KEEP=1 $KIT/run-test.sh CHECKOUT first"
RUN=$STATE/results/probes-$(date +%Y%m%d-%H%M%S); mkdir -p "$RUN"
TR=$RUN/transcript.txt; : > "$TR"
H=/home/$TUSER
# the shell of `sudo -u`/runuser/cron: no logind session, no XDG_RUNTIME_DIR, no USER/LOGNAME, a bare PATH
NOSESSION="runuser -u $TUSER -- env -i HOME=$H PATH=/usr/bin:/bin OPENCLAW_STATE_DIR=$H/demo/.openclaw"

say() { printf '%s\n' "$*" | tee -a "$TR"; }
U() { printf '\ntester@%s$ %s\n' "$MACHINE" "$1" >> "$TR"; OUT=$(ux "$1" 2>&1); RC=$?
      printf '%s\n[exit %s]\n' "$OUT" "$RC" >> "$TR"; }
A() { printf '\nroot@%s# %s\n' "$MACHINE" "$1" >> "$TR"; OUT=$(cx bash -c "$1" 2>&1); RC=$?
      printf '%s\n[exit %s]\n' "$OUT" "$RC" >> "$TR"; }
N() { A "$NOSESSION bash -c '$1'"; }   # as tester, without a session (no single quotes in $1)
prop() { ux "systemctl --user show occd.service -p $1 --value" 2>/dev/null; }
RESULTS=()
begin() { CUR=$1; WHY=(); say ""; say "=== $1"; }
ok()   { say "  ok:   $1"; }
bad()  { WHY+=("$1"); say "  FAIL: $1"; }
expect() { local d=$1; shift; if "$@"; then ok "$d"; else bad "$d"; fi; }
end()  { local r; if [ ${#WHY[@]} -eq 0 ]; then r="PASS $CUR"; else r="FAIL $CUR -- ${WHY[*]}"; fi
         RESULTS+=("$r"); say "--> $r"; }
has() { grep -qE -- "$1" <<<"$OUT"; }
wait_prop() { local i; for i in $(seq 1 "$3"); do [ "$(prop "$1")" = "$2" ] && return 0; sleep 1; done; return 1; }
service_line() { grep -E '^\S+ +service ' <<<"$OUT"; }

# ------------------------------------------------------------------------------------------------- P1
begin "P1 the service finds the user's openclaw (only in ~/.local/bin)"
# (a) installed before openclaw exists (the order of the kit's own probe): the unit's PATH still holds ~/.local/bin
U "rm -rf ~/.local/bin ~/openclaw-calls.log; occd service install --act --interval 1m"; say "$OUT"
expect "service install (no openclaw yet) exit 0, says none was found" bash -c '[ "$2" = 0 ] && grep -q "^openclaw: none found" <<<"$1"' _ "$OUT" "$RC"
wait_prop ActiveState active 60
# a fake openclaw that records who ran it; it answers --version like the file-era release the demo state is and
# refuses anything else. Debian's ~/.profile puts ~/.local/bin on a login shell's PATH (when it exists).
U "mkdir -p ~/.local/bin && printf '#!/bin/sh\necho \"\$PPID \$*\" >> \$HOME/openclaw-calls.log\n[ \"\$1\" = --version ] && exec echo 2026.7.35\necho fake openclaw >&2; exit 1\n' > ~/.local/bin/openclaw && chmod +x ~/.local/bin/openclaw && cat ~/.local/bin/openclaw"
U "echo shell: \$(command -v openclaw); ls /usr/local/bin /usr/bin /bin | grep -c '^openclaw\$'"
say "  $(tr '\n' ' ' <<<"$OUT")"
expect "the login shell finds ~/.local/bin/openclaw, and it is nowhere on the manager's PATH" \
    bash -c 'grep -q "shell: /home/tester/.local/bin/openclaw" <<<"$1" && grep -qx 0 <<<"$1"' _ "$OUT"
# run, in the daemon's own environment, what occd runs to find openclaw (occd.lean.openclaw_bin), and run it
FIND="from occd.lean import openclaw_bin; import subprocess; b = openclaw_bin(); print(\"found\", b); print(\"version\", subprocess.run([b, \"--version\"], capture_output=True, text=True).stdout.strip() if b else None)"
found_by_daemon() {
    U "env -i \$(tr '\\0' ' ' < /proc/$(prop MainPID)/environ) ~/v/bin/python3 -c '$FIND'"; say "$OUT"
    grep -q "^found $H/.local/bin/openclaw$" <<<"$OUT" && grep -q "^version 2026.7.35$" <<<"$OUT"
}
expect "installed before it: the daemon's environment finds and runs ~/.local/bin/openclaw" found_by_daemon
# (b) installed again now: the openclaw is resolved and written into the unit
U "occd service install --act --interval 1m"; say "$OUT"
expect "service install exit 0" [ "$RC" = 0 ]
expect "service install says which openclaw it wrote" has "^openclaw: ~/.local/bin/openclaw \(written into the service"
sleep 2; wait_prop ActiveState active 60
PID=$(prop MainPID)
U "tr '\\0' '\\n' < /proc/$PID/environ | grep -E '^(PATH|OCCD_OPENCLAW_BIN)='"; say "$OUT"
expect "the daemon has OCCD_OPENCLAW_BIN=~/.local/bin/openclaw" has "^OCCD_OPENCLAW_BIN=$H/.local/bin/openclaw$"
expect "the daemon's PATH holds ~/.local/bin" has "^PATH=(.*:)?$H/.local/bin(:|$)"
expect "with the service's environment occd finds and runs ~/.local/bin/openclaw" found_by_daemon
U "occd doctor --check service-openclaw"; say "$OUT"
expect "doctor: the service runs the shell's openclaw" has "^(OK|✓) +service-openclaw +the service runs ~/.local/bin/openclaw, as this shell does"
end

# ------------------------------------------------------------------------------------------------- P2
begin "P2 a shell without a logind session sees the running daemon and cannot start a second one"
PID=$(prop MainPID)
N 'echo XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-unset} USER=${USER:-unset} LOGNAME=${LOGNAME:-unset}; cd; ~/v/bin/occd status | head -1'
say "$OUT"
expect "no XDG_RUNTIME_DIR, USER, LOGNAME in that shell" has "XDG_RUNTIME_DIR=unset USER=unset LOGNAME=unset"
expect "occd status: running (pid $PID, the service's)" has "running \(pid $PID"
N 'cd; timeout 120 ~/v/bin/occd run --once; echo run-once-exit=$?'
say "$OUT"
expect "occd run --once exits 75 (the single-instance lock holds)" has "^run-once-exit=75$"
expect "... naming the service's pid" has "already running \(pid $PID\)"
expect "the service still runs, same pid" [ "$(prop MainPID)" = "$PID" -a "$(prop ActiveState)" = active ]
N 'cd; ~/v/bin/occd doctor'; say "$OUT"
L=$(service_line); say "  service line: $L"
expect "doctor's service line: installed, active (the user manager reached)" grep -qE '^(OK|✓) +service +installed .*, active' <<<"$L"
expect "doctor's heartbeat sees the daemon's pid" has "^\S+ +heartbeat .*\(pid $PID\)"
N 'cd; ~/v/bin/occd service status | head -3; echo status-exit=${PIPESTATUS[0]}'; say "$OUT"
expect "occd service status from that shell: active (running), exit 0" bash -c 'grep -q "Active: active (running)" <<<"$1" && grep -q "^status-exit=0$" <<<"$1"' _ "$OUT"
end

# ------------------------------------------------------------------------------------------------- P3
begin "P3 linger found with USER/LOGNAME unset"
A "loginctl show-user $TUSER -p Linger"; expect "logind: Linger=yes" has "Linger=yes"
U "env -u USER -u LOGNAME occd doctor --check service"; say "$OUT"
expect "login shell, USER/LOGNAME unset: no 'not lingering'" bash -c '! grep -q "not lingering" <<<"$1" && grep -qE "^(OK|✓) +service " <<<"$1"' _ "$OUT"
N 'cd; ~/v/bin/occd doctor --check service'; say "$OUT"
expect "no-session shell, USER/LOGNAME unset: no 'not lingering'" bash -c '! grep -q "not lingering" <<<"$1" && grep -qE "^(OK|✓) +service " <<<"$1"' _ "$OUT"
# the control: linger off is said, also without USER/LOGNAME (the su session keeps the user manager up meanwhile)
A "loginctl disable-linger $TUSER; su - $TUSER -c 'env -u USER -u LOGNAME ~/v/bin/occd doctor --check service'; loginctl enable-linger $TUSER"
say "  with linger disabled: $OUT"
expect "control: with linger off, doctor says 'not lingering'" has "not lingering"
sleep 2; expect "service still active after the linger control" [ "$(prop ActiveState)" = active ]
end

# ------------------------------------------------------------------------------------------------- P4
begin "P4 an active but disabled unit is flagged by doctor"
U "systemctl --user disable occd 2>&1; systemctl --user is-active occd; systemctl --user is-enabled occd; occd doctor --check service; echo doctor-exit=\$?"
say "$OUT"
expect "the unit is active and disabled" bash -c 'grep -qx active <<<"$1" && grep -qx disabled <<<"$1"' _ "$OUT"
expect "doctor flags it: warning, 'disabled', hint systemctl --user enable" \
    has "^(WARN|!) +service +installed .*, active, but disabled: .*systemctl --user enable occd"
U "systemctl --user enable occd 2>&1; occd doctor --check service"; say "$OUT"
expect "enabled again: the service line is OK" has "^(OK|✓) +service +installed .*, active$"
end

# ------------------------------------------------------------------------------------------------- P6
begin "P6 journal: occd service logs, occd logs --journal show the daemon's own lines"
# the kit's check 5 means this, but its wait loop is quoted so that $(seq 1 60) expands on the host into
# separate lines (a syntax error inside the container): it then passes only when the daemon's lines happen to
# be among the last 6. Here: the manager at info level, a scan asked for, and a real wait for the daemon's line.
U "systemctl --user log-level info; occd scan-now; for i in \$(seq 1 60); do journalctl --user -u occd -n 6 -o cat | grep -q '^occd\.' && break; sleep 1; done; echo waited=\$i"
say "  $OUT"
U "occd service logs -n 6"; say "$OUT"
expect "occd service logs: exit 0 with the daemon's own lines" bash -c '[ "$2" = 0 ] && grep -q "occd\[[0-9]*\]: occd\." <<<"$1"' _ "$OUT" "$RC"
U "occd logs --journal -n 6"; say "$OUT"
expect "occd logs --journal: exit 0 with the daemon's own lines" bash -c '[ "$2" = 0 ] && grep -q "occd\[[0-9]*\]: occd\." <<<"$1"' _ "$OUT" "$RC"
end

# ------------------------------------------------------------------------------------------------- P5
begin "P5 uninstall: nothing installed says so; the real one leaves nothing"
U "mkdir -p /tmp/h && HOME=/tmp/h occd service uninstall; echo exit=\$?"; say "$OUT"
expect "HOME=/tmp/h occd service uninstall: 'not installed', exit 0, no daemon-reload complaint" \
    bash -c 'grep -q "is not installed" <<<"$1" && grep -q "^exit=0$" <<<"$1" && ! grep -q "daemon-reload" <<<"$1"' _ "$OUT"
expect "the real service untouched by it" [ "$(prop ActiveState)" = active ]
U "occd service uninstall; echo exit=\$?; sleep 1; ls ~/.config/systemd/user/occd.service 2>&1; pgrep -u $TUSER -af '[o]ccd run' || echo 'no occd process'"
say "$OUT"
expect "uninstall: exit 0, unit file gone, no process" \
    bash -c 'grep -q "^exit=0$" <<<"$1" && grep -q "No such file" <<<"$1" && grep -q "no occd process" <<<"$1"' _ "$OUT"
U "cat ~/openclaw-calls.log 2>/dev/null | head -3"; say "  openclaw calls recorded by the fake: ${OUT:-none}"
U "rm -f ~/.local/bin/openclaw ~/openclaw-calls.log"
end

say ""; say "=== probes summary (transcript: $TR)"
fails=0; for r in "${RESULTS[@]}"; do say "$r"; case $r in FAIL*) fails=$((fails+1));; esac; done
exit $(( fails > 0 ))
