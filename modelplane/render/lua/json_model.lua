-- The body's top-level "model", read the way the engines read it (shared by the front door's scripts).
-- Python's json, Go's encoding/json and JSON.parse keep the LAST of duplicate keys; a scanner that
-- stopped at the first would route one model and serve another. So the whole top-level object is
-- scanned and a second "model" is an error the caller answers with a 400.
-- It raises an error on malformed input; callers run it under pcall.

local byte, char, find, format, sub = string.byte, string.char, string.find, string.format, string.sub

-- The scanner walks bytes in plain loops, which LuaJIT compiles to machine code: a few milliseconds per
-- MiB whatever the body's shape (pattern-matching calls are not compiled, and an adversarial body of
-- tiny members or deep nesting would cost one call per byte).

local function skip_ws(s, i)
  local b = byte(s, i)
  while b == 32 or b == 9 or b == 10 or b == 13 do
    i = i + 1
    b = byte(s, i)
  end
  return i
end

-- The index after the string that opens at i.
local function string_end(s, i)
  local n = #s
  i = i + 1
  while i <= n do
    local b = byte(s, i)
    if b == 34 then return i + 1 end
    i = i + (b == 92 and 2 or 1) -- a backslash: the next character is escaped, whatever it is
  end
  error("unterminated string")
end

-- The index after the object or array that opens at i; brackets inside strings do not count.
local function container_end(s, i)
  local n, depth = #s, 0
  while i <= n do
    local b = byte(s, i)
    if b == 34 then
      i = string_end(s, i)
    else
      if b == 91 or b == 123 then
        depth = depth + 1
      elseif b == 93 or b == 125 then
        depth = depth - 1
        if depth == 0 then return i + 1 end
      end
      i = i + 1
    end
  end
  error("unterminated container")
end

-- The index after a number, true, false or null at i (what JSON, and Python's NaN and Infinity, allow).
local function literal_end(s, i)
  local n, start = #s, i
  while i <= n do
    local b = byte(s, i)
    -- letters, digits, '.', '+', '-'
    if not ((b >= 48 and b <= 57) or (b >= 65 and b <= 90) or (b >= 97 and b <= 122) or b == 46 or b == 43
            or b == 45) then
      break
    end
    i = i + 1
  end
  if i == start then error("value expected") end
  return i
end

local ESCAPES = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }

-- A JSON string's text decoded, or nil when it holds an escape we do not decode: names are
-- printable ASCII, so a \u beyond ASCII could never match one anyway.
local function unescape(raw)
  if not find(raw, "\\", 1, true) then return raw end
  local out, i = {}, 1
  while true do
    local j = find(raw, "\\", i, true)
    if not j then
      out[#out + 1] = sub(raw, i)
      return table.concat(out)
    end
    out[#out + 1] = sub(raw, i, j - 1)
    local c = sub(raw, j + 1, j + 1)
    if c == "u" then
      local hex = sub(raw, j + 2, j + 5)
      local code = find(hex, "^%x%x%x%x$") and tonumber(hex, 16)
      if not code or code > 127 then return nil end
      out[#out + 1] = char(code)
      i = j + 6
    elseif ESCAPES[c] then
      out[#out + 1] = ESCAPES[c]
      i = j + 2
    else
      return nil
    end
  end
end

-- The top-level "model" of a JSON object body, as a table:
--   { count = how many top-level "model" keys, raw = the first one's text as written (nil when
--     it is no string), name = that text decoded (nil when it holds an escape we do not decode),
--     first, last = where the raw text starts and ends }
-- or nil when the body is no JSON object.
local function top_level_model(s)
  local i = skip_ws(s, 1)
  if byte(s, i) ~= 123 then return nil end
  local found = { count = 0 }
  i = skip_ws(s, i + 1)
  if byte(s, i) == 125 then return found end
  while true do
    if byte(s, i) ~= 34 then error("key expected") end
    local key_end = string_end(s, i)
    local length = key_end - i - 2
    -- "model" is 5 characters, at most 30 written with escapes: only such keys are decoded.
    local is_model = length >= 5 and length <= 30 and unescape(sub(s, i + 1, key_end - 2)) == "model"
    i = skip_ws(s, key_end)
    if byte(s, i) ~= 58 then error("colon expected") end
    i = skip_ws(s, i + 1)
    local b = byte(s, i)
    local value_end
    if b == 34 then
      value_end = string_end(s, i)
      if is_model and found.count == 0 then
        found.raw, found.first, found.last = sub(s, i + 1, value_end - 2), i + 1, value_end - 2
        found.name = unescape(found.raw)
      end
    elseif b == 123 or b == 91 then
      value_end = container_end(s, i)
    else
      value_end = literal_end(s, i)
    end
    if is_model then found.count = found.count + 1 end
    i = skip_ws(s, value_end)
    b = byte(s, i)
    if b == 125 then return found end
    if b ~= 44 then error("comma expected") end
    i = skip_ws(s, i + 1)
  end
end

-- Text for inside a JSON string. Bytes beyond ASCII become U+FFFD: the client's text need not be
-- UTF-8, and the answer must stay valid JSON. Long names are cut: no need to echo a whole body.
local function json_text(text)
  return (sub(text, 1, 200):gsub('[%c"\\\128-\255]', function(c)
    if c == '"' or c == "\\" then return "\\" .. c end
    if byte(c) >= 128 then return "\\ufffd" end
    return format("\\u%04x", byte(c))
  end))
end

-- What the front door refuses, per error code: its HTTP status, Anthropic's error type, OpenAI's `param`.
local PROBLEMS = {
  missing_model = { status = "400", anthropic = "invalid_request_error", param = '"model"' },
  duplicate_model = { status = "400", anthropic = "invalid_request_error", param = '"model"' },
  invalid_body = { status = "400", anthropic = "invalid_request_error", param = "null" },
  model_not_found = { status = "404", anthropic = "not_found_error", param = '"model"' },
  request_too_large = { status = "413", anthropic = "request_too_large", param = "null" },
}

-- Answer in the error shape of the API the client speaks (OpenAI's, or Anthropic's on /v1/messages),
-- and end the request. `message` is JSON string text already.
local function reject(handle, anthropic, code, message)
  local problem, body = PROBLEMS[code]
  if anthropic then
    body = '{"type":"error","error":{"type":"' .. problem.anthropic .. '","message":"' .. message .. '"}}'
  else
    body = '{"error":{"message":"' .. message .. '","type":"invalid_request_error","param":' .. problem.param
      .. ',"code":"' .. code .. '"}}'
  end
  handle:respond({ [":status"] = problem.status, ["content-type"] = "application/json" }, body)
end

-- The request's body as text ("" when it has none).
local function body_text(handle)
  local body = handle:body()
  if not body or body:length() == 0 then return "" end
  return body:getBytes(0, body:length())
end

-- The body with its top-level "model" replaced by `escaped` (text already escaped for a JSON string).
local function with_model(handle, headers, text, found, escaped)
  local renamed = sub(text, 1, found.first - 1) .. escaped .. sub(text, found.last + 1)
  handle:body():setBytes(renamed)
  headers:replace("content-length", tostring(#renamed))
end

local TOO_LARGE = "The request body is larger than this front door accepts (" .. BODY_LIMIT .. " bytes)"
local NOT_AN_OBJECT = "The request body must be a JSON object"
local MISSING = "The request needs a `model` field naming one of this front door's models (GET /v1/models lists them)"
local DUPLICATE = "The request names `model` more than once; send it once"

-- The body's text and its top-level "model" (see top_level_model), or nothing once the client has
-- been answered: 413 when the declared length is over the limit (before any byte is read), 400 for a
-- body that is missing or no JSON object, has no top-level string "model", or has more than one.
local function read_model(handle, headers, anthropic)
  local length = tonumber(headers:get("content-length") or "")
  if length and length > BODY_LIMIT then
    return reject(handle, anthropic, "request_too_large", TOO_LARGE)
  end
  local text = body_text(handle)
  if text == "" then return reject(handle, anthropic, "missing_model", MISSING) end
  local ok, found = pcall(top_level_model, text)
  if not ok or found == nil then
    return reject(handle, anthropic, "invalid_body", NOT_AN_OBJECT)
  end
  if found.count > 1 then
    return reject(handle, anthropic, "duplicate_model", DUPLICATE)
  end
  if found.raw == nil or found.raw == "" then
    return reject(handle, anthropic, "missing_model", MISSING)
  end
  return text, found
end
