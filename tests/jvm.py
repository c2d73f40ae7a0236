"""Java options for every Spark JVM the suite starts (the shared session, and
each spark-submit of the daily application).

Each JVM lives seconds to minutes and runs little hot code: the C2 compiler's
threads cost more CPU than their code gives back, and on two cores they take it
from the tests beside them. C1 alone and the serial collector cut the CPU of the
Spark tests by about a fifth (measured on tests/spark/test_spark_write.py: 150 s
of CPU to 117 s); what the tests check does not depend on either.
"""

JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
