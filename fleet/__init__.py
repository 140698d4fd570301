"""Fleet what-ifs: snapshots of many clusters, scenarios on them, assignors compared, in process or on Spark.

``snapshot`` writes one JSON document per cluster; ``scenarios`` changes a
snapshot the way an operator might (pure, seeded); ``units`` computes the
figures of one (cluster, group, scenario, assignor) with the project's own
``rackplan assign``; ``local`` runs them in process and ``job`` fans them out on
Spark, both writing the same Parquet through ``outputs``;
``report`` turns the Parquet tables into a static HTML page.  Only ``job`` and
``report`` need the ``spark`` extra (pyspark, pandas, pyarrow, matplotlib).
"""

if __name__ != "rackplan.fleet":  # one copy of every module: never both ``fleet.x`` and ``rackplan.fleet.x``
    raise ImportError(
        f"import rackplan.fleet, not {__name__} (the distribution's only top-level name is rackplan)"
    )
