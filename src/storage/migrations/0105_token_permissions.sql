-- API tokens that carry less than their owner (issue 17): an optional permission list; the
-- token acts with the intersection of it and the owner's permissions at each request. NULL:
-- everything the owner holds (the spec's behaviour).
ALTER TABLE api_tokens ADD COLUMN IF NOT EXISTS permissions text[];
