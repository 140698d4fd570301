"""Cross-rack bytes/s in dollars per month: the one conversion every figure (metrics, /v1/plans, alerts) uses.

A byte that crosses racks leaves one zone and enters another; clouds charge
both sides (AWS: $0.01/GB out of the producer-side zone and $0.01/GB into the
consumer's), so a crossing byte costs ``2 x prices.cross_az_per_gb`` per GB.
A month is 730 hours, the month cloud price lists bill by (AWS, GCP, Azure; the
fleet report uses the same constant); a GB is 10^9 bytes.
"""

from __future__ import annotations

#: seconds in the billing month: 730 hours
SECONDS_PER_MONTH = 730 * 3600
#: a GB as clouds bill it
BYTES_PER_GB = 1_000_000_000
#: sides a crossing byte is charged on (out of one zone, into the other)
SIDES_CHARGED = 2


def dollars_per_month(cross_rack_bytes_per_s: float, price_per_gb: float) -> float:
    """What ``cross_rack_bytes_per_s`` sustained for a month costs at ``price_per_gb`` charged each way."""
    return cross_rack_bytes_per_s * SECONDS_PER_MONTH / BYTES_PER_GB * price_per_gb * SIDES_CHARGED
