#!/usr/bin/env bash
# torch 2.6 (Debian 13's python3-torch), kept under its old name: the same
# as `scripts/torch.sh 2.6 ...`, which runs all three references.
#
#   scripts/torch2.sh setup | python3 ARGS... | argv | path
exec "$(dirname "$0")/torch.sh" 2.6 "$@"
