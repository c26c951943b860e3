#!/usr/bin/env bash
# Installs the dependencies (with Debian's PyTorch, for the interop tests),
# builds everything warning-free, and runs the whole test suite; then the
# hardening pass (scripts/ci-hardening.sh: the suite again under ASan+UBSan,
# each fuzz target for 30 s, the concurrency test under TSan). Set
# TORCHPORT_SKIP_HARDENING=1 to stop after the normal tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
t0=$SECONDS
# ccache when present (the wheel below then reuses the library's objects).
launch=()
command -v ccache > /dev/null && launch=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTORCHPORT_WERROR=ON -DTORCHPORT_BUILD_TESTS=ON \
  -DTORCHPORT_BUILD_FUZZERS=ON -DTORCHPORT_BUILD_PYTHON=ON -DPython_EXECUTABLE=/usr/bin/python3 "${launch[@]}"
cmake --build build
# The suite, on every core (tests that start servers or must be alone are
# RUN_SERIAL; the sanitizer pass runs the same tests in parallel too), then
# the wall-clock/memory budgets (label `budget`) alone, so that other tests
# do not eat their time.
ctest --test-dir build --output-on-failure --timeout 900 -j "$(nproc)" -LE budget
ctest --test-dir build --output-on-failure --timeout 900 -L budget
echo "test.sh: build and tests took $((SECONDS - t0)) s"
# The Python wheel (pyproject.toml): built as CI builds it, installed into a
# fresh virtual environment (numpy from the index), imported and used.
t1=$SECONDS
rm -rf build/wheelhouse build/wheel-venv build/wheel-build-venv
# pip from a virtual environment (python3-venv), not Debian's python3-pip:
# the wheel is built as a user builds it, and a fresh Debian has no pip.
/usr/bin/python3 -m venv build/wheel-build-venv
SKBUILD_BUILD_DIR=build/wheel-build CMAKE_ARGS="${launch[*]} -DTORCHPORT_WERROR=ON" \
  build/wheel-build-venv/bin/pip wheel . --no-deps --no-input -q -w build/wheelhouse
/usr/bin/python3 -m venv build/wheel-venv
build/wheel-venv/bin/pip install --no-input -q build/wheelhouse/torchport-*.whl
(cd /tmp && "$OLDPWD/build/wheel-venv/bin/python" -c "
import sys, torchport
f = torchport.open(sys.argv[1]); assert f.keys() and f.get(f.keys()[0]) is not None
assert torchport.scan(sys.argv[2]).verdict == 'unsafe'
print('wheel: torchport', torchport.__version__, 'imports,', len(f.keys()), 'tensors')
" "$OLDPWD/tests/fixtures/checkpoint.pt" "$OLDPWD/tests/security/crafted/os_system.pt")
build/wheel-venv/bin/torchport scan -q tests/fixtures/checkpoint.pt
echo "test.sh: the wheel (build, fresh venv, import) took $((SECONDS - t1)) s"
if [ "${TORCHPORT_SKIP_HARDENING:-0}" != 1 ]; then
  bash scripts/ci-hardening.sh
fi
echo "test.sh: everything took $((SECONDS - t0)) s"
