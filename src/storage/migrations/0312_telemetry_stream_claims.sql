-- JetStream buffer (decision 0311): the stream sequences whose units a writer stored, claimed
-- in the same transaction as the rows, so a unit redelivered after a crash between commit and
-- ack is recognised and not stored twice. Pruned by the retention job after the stream's
-- maximum age (an older unit cannot be redelivered).
CREATE TABLE telemetry_stream_claims (
  stream_key text NOT NULL,
  seq bigint NOT NULL,
  claimed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (stream_key, seq)
);
CREATE INDEX telemetry_stream_claims_claimed_at ON telemetry_stream_claims (claimed_at);
