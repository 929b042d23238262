"""Work that runs without a person at the keyboard: schedules (later the board and
delegation). schedule_types.py holds the values and the `SchedulesAccess` Protocol."""
