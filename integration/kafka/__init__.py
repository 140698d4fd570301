"""Real Apache Kafka for the integration suite: jars from Maven (pom.xml), a launcher, the compose mapping."""
