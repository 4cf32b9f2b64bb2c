#!/bin/bash
# Entrypoint of the dev overlay's PostgreSQL: on the first start it creates
# the cluster in $PGDATA (a volume) with the superuser "penguin", whose
# password is read from the file $POSTGRES_PASSWORD_FILE (a mounted Secret),
# and the database "penguin"; then it runs the server in the foreground so
# that SIGTERM from the kubelet is a clean "smart" shutdown.
set -euo pipefail
: "${PGDATA:?PGDATA must name the data directory}"
: "${POSTGRES_PASSWORD_FILE:?POSTGRES_PASSWORD_FILE must name the password file}"
bin=/usr/lib/postgresql/15/bin
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	"$bin/initdb" -D "$PGDATA" -U penguin --pwfile="$POSTGRES_PASSWORD_FILE" -E UTF8 \
		--auth-local=trust --auth-host=scram-sha-256 >/dev/null
	# Pods reach the server over the pod network, always with the password.
	echo "host all all 0.0.0.0/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
	echo "CREATE DATABASE penguin" | "$bin/postgres" --single -D "$PGDATA" postgres >/dev/null
fi
exec "$bin/postgres" -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp -c jit=off \
	-c max_connections="${POSTGRES_MAX_CONNECTIONS:-100}"
