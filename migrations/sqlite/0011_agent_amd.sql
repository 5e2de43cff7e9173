-- Answering-machine detection per agent. The agent object lives in `doc`; agents saved before
-- this get detection on with every parameter at its default, and no voicemail message (a
-- machine is hung up on), written out so every stored document has the same keys.
UPDATE agents
SET doc = json_set(
    doc,
    '$.answering_machine_detection',
    json('{"enabled":true,"initial_silence_ms":null,"greeting_ms":null,"after_greeting_silence_ms":null,"total_analysis_time_ms":null,"min_word_length_ms":null,"between_words_silence_ms":null,"maximum_number_of_words":null,"maximum_word_length_ms":null,"silence_threshold":null}'),
    '$.voicemail_message',
    json('null')
)
WHERE json_type(doc, '$.answering_machine_detection') IS NULL;
