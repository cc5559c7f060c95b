#!/bin/bash
# Installed as Inductor's C++ compiler (CXX) by bench/coldstart/run.py:
# runs g++ and appends one line per real compile, preprocess or link to
# $COLDSTART_CXX_LOG: the rank (torchrun's RANK) and the user and system
# CPU seconds of g++ and its children (cc1plus, as, ld), and the output
# file's name. Identity queries
# (--version, -v) are not counted.
case "$*" in
  --version|-v|*" --version"*) exec g++ "$@" ;;
esac
g++ "$@"
rc=$?
# `times` in this shell (not a subshell): line 2 is the children's CPU time.
times > "$COLDSTART_CXX_LOG.$$"
{ read -r _; read -r cu cs; } < "$COLDSTART_CXX_LOG.$$"
rm -f "$COLDSTART_CXX_LOG.$$"
out=-
prev=
for a in "$@"; do [[ $prev == -o ]] && out=${a##*/}; prev=$a; done
echo "${RANK:--} $cu $cs $out" >> "${COLDSTART_CXX_LOG:?}"
exit $rc
