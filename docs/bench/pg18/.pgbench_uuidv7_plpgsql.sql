SELECT plpgsql_uuidv7();
