SELECT uuidv7_next();
