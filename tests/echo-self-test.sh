#!/bin/sh
# The echo example serves 50 clients over loopback and checks every byte.
exec ./examples/echo --self-test
