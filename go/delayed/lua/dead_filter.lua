-- Which dead letters a filtered page or bulk operation takes (peek_dead.lua and bulk_dead.lua start with
-- this file). The filter comes from Python (delayed/wire/dead_letter.py, letter_filter), which alone names
-- the letter's format: a JSON object
--   {"record": the letter's field holding its record, "match": {name: value, ...},
--    "unreadable": what a record that is not a JSON object reads as, {name: value, ...}}
-- A letter matches when its record, decoded, has each name of "match" equal to its value.
-- dead_filter(spec) gives the test, a function of a letter's flat field list returning whether it
-- matches and how many bytes of record it decoded; nil for spec '' (every letter matches).
local function dead_filter(spec)
    if spec == '' then
        return nil
    end
    local filter = cjson.decode(spec)
    return function(fields)
        local record = ''
        for j = 1, #fields, 2 do
            if fields[j] == filter.record then
                record = fields[j + 1]
            end
        end
        local decoded, entry = pcall(cjson.decode, record)
        if not decoded or type(entry) ~= 'table' or entry[1] ~= nil then  -- not JSON, or an array
            entry = filter.unreadable
        end
        for name, value in pairs(filter.match) do
            if entry[name] ~= value then
                return false, #record
            end
        end
        return true, #record
    end
end
