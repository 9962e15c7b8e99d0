# tests/transformer/cli_check.cmake — examples/transformer end to end on the Llama test
# fixture (tests/models/data/tiny_llama) with a small tokenizer written for it
# (tests/transformer/data/tiny_tokenizer: 81 ids of characters and a few merges, special
# tokens for a chat template), run by ctest as
#   cmake -DTRANSFORMER=... -DMODEL=... -DTOKENIZER=... -DBACKEND=cpu|vulkan -DCHECK=<name> -P cli_check.cmake
# CHECK chat_ids: --prompt with --chat gives the template's ids (checked here id by id) and
#   then exactly the ids --ids gives for those ids.
# CHECK seed: sampling with a seed repeats its ids exactly, in both modes.
# CHECK errors: bad flags and values exit 2 with a message naming them.
cmake_minimum_required(VERSION 3.24)

function(run out_var err_var rc_var)
  execute_process(COMMAND ${TRANSFORMER} ${MODEL} --backend ${BACKEND} ${ARGN}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 300)
  set(${out_var} "${out}" PARENT_SCOPE)
  set(${err_var} "${err}" PARENT_SCOPE)
  set(${rc_var} "${rc}" PARENT_SCOPE)
endfunction()

function(expect_ok rc out err what)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what}: exit ${rc}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
endfunction()

if(CHECK STREQUAL "chat_ids")
  run(out err rc --tokenizer ${TOKENIZER} --prompt " the Hi " --chat --system "in" --steps 8 --ignore-eos --print-ids)
  expect_ok("${rc}" "${out}" "${err}" "--prompt --chat")
  if(NOT err MATCHES "prompt ids: ([0-9,]+)\ngenerated ids: ([0-9,]+)\n")
    message(FATAL_ERROR "no ids on standard error:\n${err}")
  endif()
  set(prompt "${CMAKE_MATCH_1}")
  set(generated "${CMAKE_MATCH_2}")
  # <s> <|system|> in <|end|> <|user|> the Hi <|end|> <|assistant|>: the template trims the
  # contents; Metaspace ("first") prepends U+2581 only to text at the very start, and the
  # text between special tokens is a piece of its own: "in" -> in (a merge); "the Hi" ->
  # "the▁Hi" -> t, he (a merge), ▁, H, i
  set(expect "1,95,79,96,93,23,77,3,37,12,96,94")
  if(NOT prompt STREQUAL expect)
    message(FATAL_ERROR "the chat prompt's ids are ${prompt}, expected ${expect}\n${err}")
  endif()
  string(REPLACE "," ";" n "${generated}")
  list(LENGTH n count)
  if(NOT count EQUAL 8)
    message(FATAL_ERROR "--steps 8 generated ${count} ids: ${generated}")
  endif()
  run(out2 err2 rc2 --ids ${prompt} --steps 8)
  expect_ok("${rc2}" "${out2}" "${err2}" "--ids")
  string(REGEX MATCH "^[0-9,]+" ids_line "${out2}")
  if(NOT ids_line STREQUAL generated)
    message(FATAL_ERROR "--ids ${prompt} gives ${ids_line}; --prompt --chat gave ${generated}")
  endif()
  if(NOT err MATCHES "prefill: 12 tokens in .* tokens/s\ndecode: 7 tokens in .* tokens/s")
    message(FATAL_ERROR "no prefill and decode speeds on standard error:\n${err}")
  endif()
  message(STATUS "chat prompt ${prompt} -> ${generated} in both modes")
elseif(CHECK STREQUAL "seed")
  set(flags --temperature 1.5 --top-k 20 --top-p 0.9 --min-p 0.02 --repeat-penalty 1.2 --presence-penalty 0.3 --steps 12)
  run(a ea ra --ids 1,15,42,7 ${flags} --seed 1234)
  run(b eb rb --ids 1,15,42,7 ${flags} --seed 1234)
  expect_ok("${ra}" "${a}" "${ea}" "sampling --ids")
  expect_ok("${rb}" "${b}" "${eb}" "sampling --ids again")
  string(REGEX MATCH "^[0-9,]+" ia "${a}")
  string(REGEX MATCH "^[0-9,]+" ib "${b}")
  if(NOT ia STREQUAL ib OR ia STREQUAL "")
    message(FATAL_ERROR "the same seed gave ${ia} and ${ib}")
  endif()
  run(c ec rc --tokenizer ${TOKENIZER} --prompt "the" ${flags} --seed 99 --ignore-eos --print-ids)
  run(d ed rd --tokenizer ${TOKENIZER} --prompt "the" ${flags} --seed 99 --ignore-eos --print-ids)
  expect_ok("${rc}" "${c}" "${ec}" "sampling --prompt")
  string(REGEX MATCH "generated ids: [0-9,]+" gc "${ec}")
  string(REGEX MATCH "generated ids: [0-9,]+" gd "${ed}")
  if(NOT gc STREQUAL gd OR gc STREQUAL "" OR NOT c STREQUAL d)
    message(FATAL_ERROR "the same seed gave '${gc}' / '${gd}', text '${c}' / '${d}'")
  endif()
  message(STATUS "seed 1234: ${ia} twice; seed 99: ${gc} twice")
elseif(CHECK STREQUAL "errors")
  foreach(case "--top-p;1.5;--top-p" "--top-p;0;--top-p" "--temperature;-1;--temperature" "--min-p;2;--min-p"
               "--top-k;x;--top-k" "--steps;0;--steps" "--backend;tpu;--backend" "--weights;f64;--weights"
               "--ids;1,x;--ids" "--ids;-4;--ids" "--repeat-penalty;0;--repeat-penalty" "--bogus;1;--bogus"
               "--stop;;--stop" "--lm-head;fp8;--lm-head" "--lm-head;int8;--lm-head")
    list(GET case 0 flag)
    list(GET case 1 value)
    list(GET case 2 name)
    run(o e r ${flag} "${value}")
    if(NOT r EQUAL 2 OR NOT e MATCHES "${name}")
      message(FATAL_ERROR "${flag} '${value}': exit ${r}, expected 2 and a message naming ${name}:\n${e}")
    endif()
  endforeach()
  run(o e r --ids 1,2 --chat)
  if(NOT r EQUAL 2 OR NOT e MATCHES "--chat")
    message(FATAL_ERROR "--ids with --chat: exit ${r}:\n${e}")
  endif()
  if(BITNET)  # a BitNet checkpoint's projections are ternary: --weights is refused
    execute_process(COMMAND ${TRANSFORMER} ${BITNET} --backend ${BACKEND} --ids 5,17 --weights int8
                    OUTPUT_VARIABLE o ERROR_VARIABLE e RESULT_VARIABLE r TIMEOUT 300)
    if(NOT r EQUAL 2 OR NOT e MATCHES "--weights")
      message(FATAL_ERROR "--weights on a BitNet checkpoint: exit ${r}, expected 2 naming --weights:\n${e}")
    endif()
  endif()
  run(o e r --help)
  if(NOT r EQUAL 0 OR NOT o MATCHES "--top-p" OR NOT o MATCHES "--chat")
    message(FATAL_ERROR "--help: exit ${r}:\n${o}")
  endif()
  message(STATUS "every bad flag refused")
else()
  message(FATAL_ERROR "cli_check.cmake: unknown CHECK '${CHECK}'")
endif()
