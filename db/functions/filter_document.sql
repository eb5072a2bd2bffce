-- filter_document: an event's body as the jsonb that endpoints' content filters (filter_path) are
-- matched against, by fan-out (fan_out_targets) and by a backfill alike.
--
-- Inputs:  p_body, the body's JSON text (event_body), or NULL.
-- Outputs: the body as jsonb; NULL for NULL.
-- Effects: none (IMMUTABLE).
-- Locks:   none.
--
-- jsonb cannot hold U+0000, so a body whose JSON escapes one (`\u0000`, valid JSON) failed the
-- cast, and with it the publish or the provider's callback, only because the tenant had a filter.
-- Here each such escape reads as U+FFFD instead: a filter sees the replacement character where the
-- payload holds NUL, while what is stored and sent stays as received. The text is read escape by
-- escape, so an escaped backslash followed by `u0000` (the six characters, not a NUL) is kept.
CREATE OR REPLACE FUNCTION filter_document(p_body text)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $function$
BEGIN
  IF strpos(p_body, '\u0000') = 0 THEN
    RETURN p_body::jsonb;
  END IF;
  RETURN (SELECT string_agg(CASE WHEN t.token[1] = '\u0000' THEN '\ufffd' ELSE t.token[1] END, '' ORDER BY t.n)
            FROM regexp_matches(p_body, '(\\u0000|\\.|[^\\]+)', 'g') WITH ORDINALITY AS t(token, n))::jsonb;
END
$function$;
