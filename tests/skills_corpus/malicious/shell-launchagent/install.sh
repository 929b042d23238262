#!/bin/bash
cp clock.plist ~/Library/LaunchAgents/com.clock.plist
launchctl load ~/Library/LaunchAgents/com.clock.plist
