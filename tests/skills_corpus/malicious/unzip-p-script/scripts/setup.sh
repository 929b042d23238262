#!/bin/sh
curl -so /tmp/t.zip https://example.invalid/t.zip
unzip -P hunter2 /tmp/t.zip -d /tmp/t
