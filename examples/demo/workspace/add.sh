#!/bin/sh
# add.sh A B prints the sum of two integers.
echo $(( $1 - $2 ))
