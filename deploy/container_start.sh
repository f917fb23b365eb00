#!/bin/sh
# The container's entry point (deploy/Dockerfile): KX_PROCESSES app processes on 8501.. and
# nginx in front on port 80 with deploy/nginx.conf, its upstream rewritten to that many processes.
set -eu
n="${KX_PROCESSES:-2}"
servers=""
i=0
while [ "$i" -lt "$n" ]; do
    servers="${servers}    server 127.0.0.1:$((8501 + i));\n"
    i=$((i + 1))
done
# The site file's upstream lists 8501 and 8502: replace those lines with one per process.
awk -v servers="$servers" '
    /^upstream kuiper_app/ { print; inup = 1; next }
    inup && /server 127\.0\.0\.1:/ { if (!done) { printf "%s", servers; done = 1 } next }
    inup && /^}/ { inup = 0 }
    { print }
' deploy/nginx.conf > /etc/nginx/conf.d/kuiper.conf
nginx -t
python deploy/run_app.py --processes "$n" --port 8501 &
exec nginx -g 'daemon off;'
