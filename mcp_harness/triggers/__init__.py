"""Triggers: the agent acts on its own — on a schedule, when a run finishes, on activity (HARNESS §10).

`sources.py` says what a trigger may be, `schedule.py` when a schedule is due, `fire.py` what one firing does (one
transaction from the firing row to the queued run), `scheduler.py` fires schedules beside the run engine, and
`chain.py` is what every run's terminal commit does for triggers. The rows live in `store/triggers.py`; agents read
and write them at `~/triggers/` (`spaces/triggers.py`).
"""
