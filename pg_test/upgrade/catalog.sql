-- A canonical description of everything the extension owns, to compare an updated
-- installation with a fresh one line by line.
WITH m AS (
  SELECT d.classid, d.objid
  FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
  WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'snowflake_id'
)
SELECT 'extension config=' || coalesce((SELECT string_agg(c::regclass::text, ',' ORDER BY c::regclass::text)
                                         FROM unnest(extconfig) c), '')
       || ' conditions=' || coalesce(array_to_string(extcondition, ','), '')
       || ' relocatable=' || extrelocatable
FROM pg_extension WHERE extname = 'snowflake_id'
UNION ALL
SELECT 'function ' || p.oid::regprocedure::text
       || ' args(' || pg_get_function_arguments(p.oid) || ')'
       || ' returns ' || pg_get_function_result(p.oid)
       || ' kind=' || p.prokind::text || ' volatile=' || p.provolatile::text || ' strict=' || p.proisstrict
       || ' parallel=' || p.proparallel::text || ' secdef=' || p.prosecdef || ' leakproof=' || p.proleakproof
       || ' cost=' || p.procost || ' rows=' || p.prorows || ' language=' || l.lanname
       || ' symbol=' || p.prosrc || ' library=' || coalesce(p.probin, '')
       || ' config=' || coalesce(array_to_string(p.proconfig, ','), '')
       || ' acl=' || coalesce(p.proacl::text, 'default')
       || ' comment=' || coalesce(obj_description(p.oid, 'pg_proc'), '')
FROM m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
       JOIN pg_language l ON l.oid = p.prolang
UNION ALL
SELECT 'relation ' || c.oid::regclass::text || ' kind=' || c.relkind::text
       || ' columns=' || coalesce((SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                               || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END, ', ' ORDER BY a.attnum)
                                   FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '')
       || ' acl=' || coalesce(c.relacl::text, 'default')
       || ' replica_identity=' || c.relreplident::text
       || ' definition=' || coalesce(pg_get_viewdef(c.oid), '')
       || ' comment=' || coalesce(obj_description(c.oid, 'pg_class'), '')
FROM m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
UNION ALL
SELECT 'type ' || t.oid::regtype::text || ' typtype=' || t.typtype::text
       || ' attributes=' || coalesce((SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
                                      FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0), '')
       || ' acl=' || coalesce(t.typacl::text, 'default')
FROM m JOIN pg_type t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid
UNION ALL
SELECT 'schema ' || n.nspname || ' acl=' || coalesce(n.nspacl::text, 'default')
       || ' comment=' || coalesce(obj_description(n.oid, 'pg_namespace'), '')
FROM m JOIN pg_namespace n ON m.classid = 'pg_namespace'::regclass AND n.oid = m.objid
UNION ALL
SELECT 'object ' || pg_describe_object(m.classid, m.objid, 0)
FROM m WHERE m.classid NOT IN ('pg_proc'::regclass, 'pg_class'::regclass, 'pg_type'::regclass, 'pg_namespace'::regclass)
UNION ALL
SELECT 'index ' || i.indexrelid::regclass::text || ' ' || pg_get_indexdef(i.indexrelid)
FROM m JOIN pg_index i ON m.classid = 'pg_class'::regclass AND i.indrelid = m.objid
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
FROM m JOIN pg_trigger t ON m.classid = 'pg_class'::regclass AND t.tgrelid = m.objid AND NOT t.tgisinternal
UNION ALL
SELECT 'data ' || m.objid::regclass::text || ' rows=' || (xpath('/row/c/text()',
         query_to_xml(format('SELECT count(*) AS c FROM %s', m.objid::regclass), false, true, '')))[1]::text
FROM m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid AND c.relkind = 'r'
ORDER BY 1;
