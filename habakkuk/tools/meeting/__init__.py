"""The meeting toolset (spec 000 "Meetings"): attending Meet, Zoom and Teams calls as a
named guest, reading their captions into a transcript, and sending notes afterwards."""
