# Sourced by .ci/run: Debian's FastAPI, uvicorn and httpx, for
# TestFastAPIPlans (cmd/protectd), which runs examples/fastapi with
# /usr/bin/python3 (the python3 on PATH may be another, without Debian's
# packages) and fails without them under CI=true.
echo "== fastapi (examples/fastapi)"
apt_install python3-fastapi python3-uvicorn python3-httpx
/usr/bin/python3 -c 'import fastapi, uvicorn; print("fastapi", fastapi.__version__, "uvicorn", uvicorn.__version__)'
