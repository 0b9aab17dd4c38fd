# README.md and docs/ link only inside the repository, to files and headings
# that exist (test/docs_links.py).
add_test(NAME docs_links COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/docs_links.py
                                 ${CMAKE_SOURCE_DIR})
