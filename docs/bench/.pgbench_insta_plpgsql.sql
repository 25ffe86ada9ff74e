SELECT insta_next_id();
