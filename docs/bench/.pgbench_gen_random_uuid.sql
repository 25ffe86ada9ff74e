SELECT gen_random_uuid();
