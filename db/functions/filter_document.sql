-- filter_document: an event's body as the jsonb that endpoints' content filters (filter_path) are
-- matched against, by fan-out (fan_out_targets) and by a backfill alike.
--
-- Inputs:  p_body, the body's JSON text (event_body), or NULL.
-- Outputs: the body as jsonb; NULL for NULL.
-- Effects: none (IMMUTABLE).
-- Locks:   none.
--
-- jsonb refuses two things JSON allows: the escape of U+0000 (`\u0000`), and an escaped surrogate
-- that is not half of a pair (`\ud800` alone). Such a body failed the cast, and with it the publish
-- or the provider's callback, only because the tenant had a filter. Here each reads as U+FFFD
-- instead: a filter sees the replacement character there, while what is stored and sent stays as
-- received. The text is read escape by escape, so an escaped backslash followed by `u0000` (six
-- characters, not a NUL) is kept, and so is a surrogate pair.
CREATE OR REPLACE FUNCTION filter_document(p_body text)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $function$
BEGIN
  IF p_body !~ '\\u(0000|[dD][89a-fA-F])' THEN
    RETURN p_body::jsonb;
  END IF;
  RETURN (SELECT string_agg(CASE WHEN t.token[1] ~ '^\\u(0000|[dD][89a-fA-F][0-9a-fA-F]{2})$' THEN '\ufffd' ELSE t.token[1] END, '' ORDER BY t.n)
            FROM regexp_matches(p_body, '(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u0000|\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\\.|[^\\]+)', 'g')
                 WITH ORDINALITY AS t(token, n))::jsonb;
END
$function$;
