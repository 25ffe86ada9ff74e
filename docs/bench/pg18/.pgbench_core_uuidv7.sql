SELECT pg_catalog.uuidv7();
