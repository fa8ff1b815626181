"""Parse and format the date strings the datasets use, without depending on the process locale.

LoCoMo writes session times as ``"1:56 pm on 8 May, 2023"``; LongMemEval as
``"2023/04/10 (Mon) 23:07"``. The synthetic generator writes LoCoMo's form.
"""

from __future__ import annotations

import re
from datetime import date, datetime

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTH_NUMBER = {name.lower(): number for number, name in enumerate(MONTHS, start=1)}
_LOCOMO_RE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I)
_LONGMEMEVAL_RE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})\s*$")


def parse_locomo_time(text: str) -> datetime | None:
    """Parse LoCoMo's ``"1:56 pm on 8 May, 2023"``; None when the string has another shape.

    >>> parse_locomo_time("1:56 pm on 8 May, 2023")
    datetime.datetime(2023, 5, 8, 13, 56)
    >>> parse_locomo_time("12:09 am on 1 January, 2024")
    datetime.datetime(2024, 1, 1, 0, 9)
    """
    match = _LOCOMO_RE.match(text)
    if match is None:
        return None
    hour_text, minute, half, day, month_name, year = match.groups()
    month = _MONTH_NUMBER.get(month_name.lower())
    hour = int(hour_text)
    if month is None or not 1 <= hour <= 12:
        return None
    hour = hour % 12 + (12 if half.lower() == "p" else 0)
    try:
        return datetime(int(year), month, int(day), hour, int(minute))
    except ValueError:
        return None


def format_locomo_time(moment: datetime) -> str:
    """Write a datetime the way LoCoMo does.

    >>> format_locomo_time(datetime(2023, 5, 8, 13, 56))
    '1:56 pm on 8 May, 2023'
    """
    hour = moment.hour % 12 or 12
    half = "pm" if moment.hour >= 12 else "am"
    return f"{hour}:{moment.minute:02d} {half} on {moment.day} {MONTHS[moment.month - 1]}, {moment.year}"


def parse_longmemeval_time(text: str) -> datetime | None:
    """Parse LongMemEval's ``"2023/04/10 (Mon) 23:07"``; None when the string has another shape.

    >>> parse_longmemeval_time("2023/04/10 (Mon) 23:07")
    datetime.datetime(2023, 4, 10, 23, 7)
    """
    match = _LONGMEMEVAL_RE.match(text)
    if match is None:
        return None
    year, month, day, hour, minute = (int(part) for part in match.groups())
    try:
        return datetime(year, month, day, hour, minute)
    except ValueError:
        return None


def format_longmemeval_time(moment: datetime) -> str:
    """Write a datetime the way LongMemEval does.

    >>> format_longmemeval_time(datetime(2023, 4, 10, 23, 7))
    '2023/04/10 (Mon) 23:07'
    """
    weekday = WEEKDAYS[moment.weekday()][:3]
    return f"{moment.year:04d}/{moment.month:02d}/{moment.day:02d} ({weekday}) {moment.hour:02d}:{moment.minute:02d}"


def format_day(day: date) -> str:
    """Write a calendar day as ``"8 May 2023"`` (the form synthetic answers use).

    >>> format_day(date(2023, 5, 8))
    '8 May 2023'
    """
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"
