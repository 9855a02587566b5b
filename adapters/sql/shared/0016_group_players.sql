-- A crash group's detail (its reports and players by build, adapters.sql.issues) reads this alone:
-- through (sku, signature, build_version, received_at) it looked up each report's player, 1.2 s
-- for a group of a quarter of a million reports.
CREATE INDEX reports_sku_signature_players ON reports (sku, signature, build_version, player_id, received_at);
