#!/bin/sh
# The project's test: add.sh must add.
fail=0
check() {
	got=$(sh add.sh "$1" "$2")
	if [ "$got" = "$3" ]; then
		echo "ok   add.sh $1 $2 = $got"
	else
		echo "FAIL add.sh $1 $2 = $got, want $3"
		fail=1
	fi
}
check 2 3 5
check 10 -4 6
[ "$fail" = 0 ] && echo "all tests passed"
exit $fail
